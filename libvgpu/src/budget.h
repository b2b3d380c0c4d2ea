/* budget.h: admission against a device's limit in the shared region.  Pure functions over the
 * region (no I/O, no locks): a compare-and-swap loop on the container's per-device used counter,
 * so processes racing can never together pass the limit, then the process's own slot counter. */
#ifndef VGPU_BUDGET_H
#define VGPU_BUDGET_H

#include <stdint.h>

#include "vgpu_region.h"

/* Reserve bytes on device entry dev: 0 when admitted, -1 when it would pass the limit (the limit
 * is re-read here: the agent may change it at any time).  slot may be NULL. */
int vgpu_budget_reserve(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                        uint64_t bytes);

/* Count bytes without admission (context overhead: the driver already spent it). */
void vgpu_budget_charge(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                        uint64_t bytes);

/* Give back what reserve or charge counted; never underflows. */
void vgpu_budget_release(struct vgpu_region *r, struct vgpu_region_proc *slot, unsigned dev,
                         uint64_t bytes);

/* Subtract from a shared counter without going below zero (reclaim and reconcile use it too). */
void vgpu_sat_sub(uint64_t *counter, uint64_t bytes);

/* What memory queries report for a device entry, given the physical free and total bytes.
 * No limit: the physical values.  Otherwise total = limit, used = container usage,
 * free = min(limit - used, physical free), never below zero. */
struct vgpu_mem_view {
    uint64_t total;
    uint64_t used;
    uint64_t free;
};
struct vgpu_mem_view vgpu_budget_view(const struct vgpu_region *r, unsigned dev,
                                      uint64_t phys_free, uint64_t phys_total);

#endif /* VGPU_BUDGET_H */
