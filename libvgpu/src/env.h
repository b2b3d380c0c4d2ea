/* env.h: the container environment read by the shim, parsed once at start (never on a hot path).
 * Pure: the environment is read through a getter so tests pass their own. */
#ifndef VGPU_ENV_H
#define VGPU_ENV_H

#include <stdint.h>

#include "vgpu_region.h"

typedef const char *(*vgpu_getenv_fn)(const char *name);

/* Memory limits per CUDA ordinal (after CUDA_VISIBLE_DEVICES): VGPU_LIMIT_NONE, or bytes, or 0
 * meaning "refuse device memory" (the safe side after a malformed value with no valid fallback). */
struct vgpu_env_limits {
    uint64_t limit[VGPU_MAX_DEVICES];
    int malformed; /* how many variables were malformed (each reported once via vgpu_log) */
};

/* CUDA_DEVICE_MEMORY_LIMIT applies to every device, CUDA_DEVICE_MEMORY_LIMIT_<i> to ordinal i,
 * each a size in vgpu_size.h's syntax (a bare number is bytes).  0 means no limit (as in HAMi).  A malformed value is reported and the tighter valid limit
 * that also applies is taken; with none, the device gets 0 (refuse), never "no limit". */
void vgpu_env_memory_limits(vgpu_getenv_fn get, struct vgpu_env_limits *out);

#endif /* VGPU_ENV_H */
