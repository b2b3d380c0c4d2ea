/* vgpu_compute.h: the compute part of the shared region (issue 7).
 *
 * Reserved, fixed-size blocks nested in the region of vgpu_region.h.  The compute limiter owns
 * the names of these fields; it must keep every block's size and use fixed-width types only.
 * Everything here is shared between processes (and the agent, through libvgpu/region.py), so
 * fields are read and written with atomics.
 */
#ifndef VGPU_COMPUTE_H
#define VGPU_COMPUTE_H

#include <stdint.h>

/* Per device of the container: 64 bytes. */
struct vgpu_compute_device {
    uint64_t reserved[8];
};

/* Per container (one per region): 64 bytes, e.g. priority and core policy. */
struct vgpu_compute_container {
    uint32_t priority;    /* CUDA_TASK_PRIORITY: 0 high, 1 low */
    uint32_t core_policy; /* GPU_CORE_UTILIZATION_POLICY */
    uint64_t reserved[7];
};

/* Per process slot: 32 bytes. */
struct vgpu_compute_proc {
    uint64_t reserved[4];
};

_Static_assert(sizeof(struct vgpu_compute_device) == 64, "compute device block is 64 bytes");
_Static_assert(sizeof(struct vgpu_compute_container) == 64, "compute container block is 64 bytes");
_Static_assert(sizeof(struct vgpu_compute_proc) == 32, "compute proc block is 32 bytes");

#endif /* VGPU_COMPUTE_H */
