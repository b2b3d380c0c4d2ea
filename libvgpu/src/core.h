/* core.h: the process's view of its container: the region, its own slot, the map from CUDA
 * devices to region entries, the allocation tables.  Initialized once (pthread_once) on the first
 * memory-related call; after fork the child starts with a fresh slot and empty tables. */
#ifndef VGPU_CORE_H
#define VGPU_CORE_H

#include <stdint.h>

#include "cuda_api.h"
#include "nvml_api.h"
#include "ptrtab.h"
#include "region.h"

struct vgpu_core {
    struct vgpu_region_handle region;
    struct vgpu_region_proc *slot;      /* claimed on first use; atomic pointer */
    int ndev;                           /* CUDA devices mapped */
    CUdevice cu_dev[VGPU_MAX_DEVICES];  /* by CUDA ordinal */
    int entry[VGPU_MAX_DEVICES];        /* by CUDA ordinal: region device entry */
    uint32_t ctx_charged[VGPU_MAX_DEVICES]; /* by entry: context overhead counted */
    int refuse_all;                     /* region unusable: admit nothing */
    int unmapped;                       /* some device could not be mapped: it is refused */
    struct vgpu_ptrtab ptrs;            /* device pointers (alloc, pitch, managed, async) */
    struct vgpu_ptrtab handles;         /* VMM allocation handles */
    struct vgpu_ptrtab arrays;          /* CUarray and CUmipmappedArray */
};

extern struct vgpu_core vgpu_core;
extern int vgpu_core_state; /* 0 not yet, 1 ready */

int vgpu_core_init(void);

/* 0 when the core is ready (one acquire load on the fast path). */
static inline int vgpu_core_ready(void)
{
    if (__builtin_expect(__atomic_load_n(&vgpu_core_state, __ATOMIC_ACQUIRE) == 1, 1))
        return 0;
    return vgpu_core_init();
}

/* Region entry of a CUDA device handle / of a CUDA ordinal / of the current context's device:
 * the entry (>= 0); VGPU_ENTRY_NONE when there is no such device or no current context (the
 * caller passes the call to the driver, which fails it); VGPU_ENTRY_REFUSE for a device that has
 * no entry (full or garbage table, lock held too long, more devices than a region holds): the
 * caller refuses memory on it, never admits it unlimited. */
#define VGPU_ENTRY_NONE (-1)
#define VGPU_ENTRY_REFUSE (-2)
int vgpu_entry_of(CUdevice dev);
int vgpu_entry_of_ordinal(int ordinal);
int vgpu_current_entry(void);
/* Region entry for an NVML device handle (by UUID); -1 if not one of the container's. */
int vgpu_entry_of_nvml(nvmlDevice_t device);

/* Admit bytes on an entry (reclaiming dead processes once before refusing): 0 or -1. */
int vgpu_admit(int entry, uint64_t bytes);
void vgpu_release(int entry, uint64_t bytes);
/* Called just before this process creates a context on an entry: claims its slot in the region
 * (so the agent lists it as the shim's before NVML can show it on the GPU) and reads the pids on
 * that GPU (so vgpu_charge_context finds the process in NVML even from another PID namespace). */
void vgpu_context_before(int entry);
/* Count this process's context on an entry once, measured (see core.c), admitted like an
 * allocation: 0, or -1 when it does not fit the limit or the entry is VGPU_ENTRY_REFUSE (the
 * caller refuses the context). */
int vgpu_charge_context(int entry);
/* Reclaim dead processes, at most every 100 ms (memory queries call it). */
void vgpu_maybe_reclaim(void);

/* Re-entry guard: a hook called from inside the real driver passes straight through. */
extern __thread int vgpu_in_driver __attribute__((tls_model("initial-exec")));

#endif /* VGPU_CORE_H */
