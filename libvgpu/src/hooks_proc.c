/* hooks_proc.c: cuGetProcAddress and cuGetProcAddress_v2.  The real driver resolves the entry
 * point (so the version and flag rules stay the driver's); when it succeeds and hooks.def has a
 * hook for that name, version and stream flag, the hook is handed out instead. */
#include "hook.h"

static void vgpu_swap_proc(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    if (symbol == NULL || pfn == NULL || *pfn == NULL)
        return;
    const struct vgpu_hook *h = vgpu_hook_for_proc(symbol, cudaVersion, flags);
    if (h != NULL)
        *pfn = h->fn;
}

CUresult vgpu_hook_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    if (vgpu_cuda_ready() != 0 || vgpu_cu.cuGetProcAddress == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_cu.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS)
        vgpu_swap_proc(symbol, pfn, cudaVersion, flags);
    return rc;
}
VGPU_EXPORT_HOOK(cuGetProcAddress);

CUresult vgpu_hook_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    if (vgpu_cuda_ready() != 0 || vgpu_cu.cuGetProcAddress_v2 == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_cu.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS)
        vgpu_swap_proc(symbol, pfn, cudaVersion, flags);
    return rc;
}
VGPU_EXPORT_HOOK(cuGetProcAddress_v2);
