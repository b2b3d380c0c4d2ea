/* vgpu_region.h: the layout of a container's shared region, the one definition in C.
 *
 * One file per container (CUDA_DEVICE_MEMORY_SHARED_CACHE), mmap'ed MAP_SHARED by every process of
 * the container that loads libvgpu, and by the agent through libvgpu/region.py, whose ctypes mirror
 * a test proves identical to this header (tests/libvgpu/test_region_layout_matches_c.py).
 *
 * Rules: magic and version first; fixed-width fields only, naturally aligned, no pointers, no
 * size_t/int/sem_t; every field shared at run time is accessed with __atomic builtins.  Bump
 * VGPU_REGION_VERSION on any change of layout or meaning.
 *
 * Who writes what:
 *   header, devices[].uuid        creator (agent's Region.create, or the first shim process, under
 *                                 flock(2) on the file)
 *   devices[].limit_bytes         creator; the agent at run time (each admission re-reads it)
 *   devices[].used_bytes          shims: compare-and-swap admission, release; reclaimers
 *   procs[]                       each shim process its own slot; any process or the agent
 *                                 reclaims slots of dead processes (state ACTIVE -> RECLAIMING)
 *   compute blocks                the compute limiter and the agent (vgpu_compute.h)
 */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stdint.h>

#include "vgpu_compute.h"

#define VGPU_REGION_MAGIC   UINT64_C(0x3147455257504756) /* "VGPWREG1" read little-endian */
#define VGPU_REGION_VERSION 1u
#define VGPU_MAX_DEVICES    16u
#define VGPU_MAX_PROCS      1024u

/* devices[].limit_bytes: no limit (the whole GPU).  0 means: admit nothing. */
#define VGPU_LIMIT_NONE UINT64_MAX

enum vgpu_device_state {
    VGPU_DEVICE_FREE = 0,  /* entry unused */
    VGPU_DEVICE_READY = 2, /* uuid and limit valid */
};

enum vgpu_proc_state {
    VGPU_PROC_FREE = 0,
    VGPU_PROC_CLAIMING = 1,   /* a process is filling in pid/start_time */
    VGPU_PROC_ACTIVE = 2,     /* counted; owner alive as far as anyone knows */
    VGPU_PROC_RECLAIMING = 3, /* someone found the owner dead and is subtracting its usage */
};

/* One device of the container, identified by its UUID (never by an ordinal: ordinals depend on
 * CUDA_VISIBLE_DEVICES and differ between CUDA and NVML).  128 bytes. */
struct vgpu_region_device {
    uint8_t uuid[16];     /* raw bytes as cuDeviceGetUuid returns them */
    uint32_t state;       /* enum vgpu_device_state */
    uint32_t flags;       /* reserved, 0 */
    uint64_t limit_bytes; /* VGPU_LIMIT_NONE or bytes; re-read on every admission */
    uint64_t used_bytes;  /* the container's admitted bytes on this device, context included */
    uint64_t peak_bytes;  /* highest used_bytes seen (monotonic, informational) */
    uint64_t oom_count;   /* admissions refused on this device */
    uint64_t reserved;
    struct vgpu_compute_device compute;
};

/* One process of the container.  A slot is owned by (pid, start_time): start_time is field 22 of
 * /proc/<pid>/stat (clock ticks after boot), so a reused pid is told apart.  304 bytes. */
struct vgpu_region_proc {
    uint32_t pid;
    uint32_t state;                                 /* enum vgpu_proc_state */
    uint64_t start_time;
    uint64_t used_bytes[VGPU_MAX_DEVICES];    /* by device entry index, context included */
    uint64_t context_bytes[VGPU_MAX_DEVICES]; /* the part of used_bytes that is context */
    struct vgpu_compute_proc compute;
};

struct vgpu_region {
    uint64_t magic;       /* VGPU_REGION_MAGIC */
    uint32_t version;     /* VGPU_REGION_VERSION */
    uint32_t flags;       /* reserved, 0 */
    uint64_t total_bytes; /* sizeof(struct vgpu_region) */
    uint32_t max_devices; /* VGPU_MAX_DEVICES */
    uint32_t max_procs;   /* VGPU_MAX_PROCS */
    uint64_t reserved[4];
    struct vgpu_compute_container compute;
    struct vgpu_region_device devices[VGPU_MAX_DEVICES];
    struct vgpu_region_proc procs[VGPU_MAX_PROCS];
};

_Static_assert(sizeof(struct vgpu_region_device) == 128, "device entry is 128 bytes");
_Static_assert(sizeof(struct vgpu_region_proc) == 304, "proc slot is 304 bytes");
_Static_assert(sizeof(struct vgpu_region) ==
                   128 + 128 * VGPU_MAX_DEVICES + 304 * VGPU_MAX_PROCS,
               "region size");

#endif /* VGPU_REGION_H */
