/* real.h: the real driver's entry points, resolved once from dlopen("libcuda.so.1") and
 * dlopen("libnvidia-ml.so.1") through the real dlsym (never through ours). */
#ifndef VGPU_REAL_H
#define VGPU_REAL_H

#include "cuda_api.h"
#include "nvml_api.h"

#define GW_CUDA_FN(name, params) CUresult(*name) params;
struct vgpu_real_cuda {
#include "cuda_api_functions.h"
#include "cuda_api_functions_extra.h"
};
#undef GW_CUDA_FN

#define GW_NVML_FN(name, params) nvmlReturn_t(*name) params;
struct vgpu_real_nvml {
#include "nvml_api_functions.h"
};
#undef GW_NVML_FN

/* NULL members: the driver lacks that entry point.  Valid once vgpu_cuda_ready() /
 * vgpu_nvml_ready() returned 0. */
extern struct vgpu_real_cuda vgpu_cu;
extern struct vgpu_real_nvml vgpu_nvml;

typedef void *(*vgpu_dlsym_fn)(void *handle, const char *name);
/* glibc's dlsym (GLIBC_2.34, else GLIBC_2.2.5); resolved by a constructor, NULL only if both
 * versions are missing. */
extern vgpu_dlsym_fn vgpu_real_dlsym;
void vgpu_real_dlsym_resolve(void);

int vgpu_cuda_load(void);
int vgpu_nvml_load(void);
extern int vgpu_cuda_state; /* 0 not yet, 1 loaded, -1 failed */
extern int vgpu_nvml_state;

/* 0 when the real libcuda is loaded (one acquire load on the fast path), else -1. */
static inline int vgpu_cuda_ready(void)
{
    int s = __atomic_load_n(&vgpu_cuda_state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s == 1, 1))
        return 0;
    return vgpu_cuda_load();
}

/* 0 when the real NVML is loaded and initialized by us, else -1. */
static inline int vgpu_nvml_ready(void)
{
    int s = __atomic_load_n(&vgpu_nvml_state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(s == 1, 1))
        return 0;
    return vgpu_nvml_load();
}

#endif /* VGPU_REAL_H */
