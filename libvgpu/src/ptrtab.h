/* ptrtab.h: O(1) map from an allocation's key (device pointer, VMM handle, array handle) to its
 * accounted size and device entry.  A large fixed open-addressing table with lock-free insert and
 * remove (bounded probing, tombstones reused), plus a mutex-protected overflow list that is only
 * touched when the table is crowded; lookups of unknown keys cost one bounded probe. */
#ifndef VGPU_PTRTAB_H
#define VGPU_PTRTAB_H

#include <pthread.h>
#include <stdint.h>

struct vgpu_ptr_entry {
    uint64_t key;
    uint64_t bytes;
    uint32_t dev;
    uint32_t aux;
};

struct vgpu_ptr_overflow;

struct vgpu_ptrtab {
    struct vgpu_ptr_entry *slots; /* 1 << log2 entries, mmap'ed lazily by the kernel */
    uint64_t mask;
    unsigned log2;
    uint32_t overflow_count;      /* atomic; > 0 means also search the overflow list */
    pthread_mutex_t overflow_lock;
    struct vgpu_ptr_overflow *overflow;
};

#define VGPU_PTRTAB_PROBES 32u

/* 0 or -1 (mmap failed). */
int vgpu_ptrtab_init(struct vgpu_ptrtab *t, unsigned log2);
/* Forget everything (the child after fork: the parent's allocations are not its own). */
void vgpu_ptrtab_reset(struct vgpu_ptrtab *t);
/* key must not be 0 or one of the two top values.  0, or -1 when no memory is left at all. */
int vgpu_ptrtab_insert(struct vgpu_ptrtab *t, uint64_t key, uint64_t bytes, uint32_t dev,
                       uint32_t aux);
/* 0 and the entry (removed), or -1 when the key is unknown. */
int vgpu_ptrtab_remove(struct vgpu_ptrtab *t, uint64_t key, struct vgpu_ptr_entry *out);

#endif /* VGPU_PTRTAB_H */
