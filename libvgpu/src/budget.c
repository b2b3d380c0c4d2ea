/* budget.c: lock-free admission on the shared region's counters. */
#include "budget.h"

#include <stddef.h>

static void vgpu_note_peak(struct vgpu_region_device *d, uint64_t used)
{
    uint64_t peak = __atomic_load_n(&d->peak_bytes, __ATOMIC_RELAXED);
    while (used > peak &&
           !__atomic_compare_exchange_n(&d->peak_bytes, &peak, used, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

int vgpu_budget_reserve(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                        uint64_t bytes)
{
    struct vgpu_region_device *d = &r->devices[dev];
    uint64_t used = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    uint64_t next;
    do {
        uint64_t limit = __atomic_load_n(&d->limit_bytes, __ATOMIC_RELAXED);
        if (bytes > limit || used > limit - bytes) {
            __atomic_fetch_add(&d->oom_count, 1, __ATOMIC_RELAXED);
            return -1;
        }
        next = used + bytes;
    } while (!__atomic_compare_exchange_n(&d->used_bytes, &used, next, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    if (slot != NULL)
        __atomic_fetch_add(&slot->used_bytes[dev], bytes, __ATOMIC_RELAXED);
    vgpu_note_peak(d, next);
    return 0;
}

void vgpu_budget_charge(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                        uint64_t bytes)
{
    struct vgpu_region_device *d = &r->devices[dev];
    uint64_t next = __atomic_add_fetch(&d->used_bytes, bytes, __ATOMIC_ACQ_REL);
    if (slot != NULL)
        __atomic_fetch_add(&slot->used_bytes[dev], bytes, __ATOMIC_RELAXED);
    vgpu_note_peak(d, next);
}

void vgpu_sat_sub(uint64_t *counter, uint64_t bytes)
{
    uint64_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
    uint64_t next;
    do {
        next = cur > bytes ? cur - bytes : 0;
    } while (!__atomic_compare_exchange_n(counter, &cur, next, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
}

void vgpu_budget_release(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                         uint64_t bytes)
{
    /* slot first: a reclaimer that sees this slot dead subtracts what is left in it */
    if (slot != NULL)
        vgpu_sat_sub(&slot->used_bytes[dev], bytes);
    vgpu_sat_sub(&r->devices[dev].used_bytes, bytes);
}

struct vgpu_mem_view vgpu_budget_view(const struct vgpu_region *r, unsigned dev,
                                      uint64_t phys_free, uint64_t phys_total)
{
    const struct vgpu_region_device *d = &r->devices[dev];
    uint64_t limit = __atomic_load_n(&d->limit_bytes, __ATOMIC_RELAXED);
    struct vgpu_mem_view v = {phys_total, phys_total - (phys_free < phys_total ? phys_free
                                                                                 : phys_total),
                              phys_free};
    if (limit == VGPU_LIMIT_NONE)
        return v;
    uint64_t used = __atomic_load_n(&d->used_bytes, __ATOMIC_RELAXED);
    v.total = limit;
    v.used = used;
    uint64_t room = used < limit ? limit - used : 0;
    v.free = room < phys_free ? room : phys_free;
    return v;
}
