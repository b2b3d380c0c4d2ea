/* hooks_cuda.c: the CUDA memory hooks.  Every hook has the same shape:
 *   real driver loaded? -> arguments / re-entry -> reserve (budget) -> real call -> commit or roll
 *   back.
 * What each path counts is documented in docs/libvgpu.md. */
#include <stdint.h>

#include "budget.h"
#include "core.h"
#include "hook.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static int vgpu_bypass(void)
{
    return vgpu_in_driver != 0;
}

/* Region entry for an allocation in the current context, or -1 to pass straight through. */
static int vgpu_alloc_entry(void)
{
    if (vgpu_core_ready() != 0)
        return -2; /* no region could be mapped at all: refuse (safe side) */
    return vgpu_current_entry();
}

static void vgpu_track(struct vgpu_ptrtab *t, uint64_t key, uint64_t bytes, int entry)
{
    /* when even the overflow list is out of memory the bytes stay counted (safe side) */
    vgpu_ptrtab_insert(t, key, bytes, (uint32_t)entry, 0);
}

/* Forget key before the real free (the driver may reuse it at once); 1 if it was tracked. */
static int vgpu_untrack(struct vgpu_ptrtab *t, uint64_t key, struct vgpu_ptr_entry *e)
{
    if (__atomic_load_n(&vgpu_core_state, __ATOMIC_ACQUIRE) != 1)
        return 0;
    return vgpu_ptrtab_remove(t, key, e) == 0;
}

static void vgpu_untrack_done(struct vgpu_ptrtab *t, const struct vgpu_ptr_entry *e, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        vgpu_release((int)e->dev, e->bytes);
    else
        vgpu_ptrtab_insert(t, e->key, e->bytes, e->dev, e->aux);
}

/* ---- device pointers --------------------------------------------------------------------------- */

CUresult vgpu_hook_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || dptr == NULL)
        return vgpu_cu.cuMemAlloc_v2(dptr, bytesize);
    int e = vgpu_alloc_entry();
    if (e == -1)
        return vgpu_cu.cuMemAlloc_v2(dptr, bytesize);
    if (e < 0 || vgpu_admit(e, bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemAlloc_v2(dptr, bytesize);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytesize);
        return rc;
    }
    vgpu_track(&vgpu_core.ptrs, *dptr, bytesize, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemAlloc_v2);

CUresult vgpu_hook_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || dptr == NULL)
        return vgpu_cu.cuMemAllocManaged(dptr, bytesize, flags);
    int e = vgpu_alloc_entry();
    if (e == -1)
        return vgpu_cu.cuMemAllocManaged(dptr, bytesize, flags);
    if (e < 0 || vgpu_admit(e, bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemAllocManaged(dptr, bytesize, flags);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytesize);
        return rc;
    }
    vgpu_track(&vgpu_core.ptrs, *dptr, bytesize, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemAllocManaged);

/* The pitch is only known after the call: allocate, then admit pitch x height exactly, and free
 * again when that does not fit (the counter is still never passed). */
CUresult vgpu_hook_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || dptr == NULL || pPitch == NULL)
        return vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    int e = vgpu_alloc_entry();
    if (e == -1)
        return vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (e < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)*pPitch, (uint64_t)Height, &bytes) ||
        vgpu_admit(e, bytes) != 0) {
        vgpu_in_driver++;
        vgpu_cu.cuMemFree_v2(*dptr);
        vgpu_in_driver--;
        *dptr = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    vgpu_track(&vgpu_core.ptrs, *dptr, bytes, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemAllocPitch_v2);

CUresult vgpu_hook_cuMemFree_v2(CUdeviceptr dptr)
{
    struct vgpu_ptr_entry t;
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || !vgpu_untrack(&vgpu_core.ptrs, dptr, &t))
        return vgpu_cu.cuMemFree_v2(dptr); /* never seen: pass through unharmed */
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemFree_v2(dptr);
    vgpu_in_driver--;
    vgpu_untrack_done(&vgpu_core.ptrs, &t, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemFree_v2);

/* ---- stream-ordered allocator: counted when the call is made (see docs/libvgpu.md) ----------- */

typedef CUresult (*vgpu_alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*vgpu_alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef CUresult (*vgpu_free_async_fn)(CUdeviceptr, CUstream);

static CUresult vgpu_alloc_async(vgpu_alloc_async_fn real, vgpu_alloc_pool_fn real_pool,
                                 CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream stream)
{
    if (vgpu_cuda_ready() != 0 || (real == NULL && real_pool == NULL))
        return CUDA_ERROR_NOT_INITIALIZED;
    int e = vgpu_bypass() || dptr == NULL ? -1 : vgpu_alloc_entry();
    if (e < -1 || (e >= 0 && vgpu_admit(e, bytesize) != 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = real != NULL ? real(dptr, bytesize, stream)
                               : real_pool(dptr, bytesize, pool, stream);
    vgpu_in_driver--;
    if (e < 0)
        return rc;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytesize);
        return rc;
    }
    vgpu_track(&vgpu_core.ptrs, *dptr, bytesize, e);
    return rc;
}

static CUresult vgpu_free_async(vgpu_free_async_fn real, CUdeviceptr dptr, CUstream stream)
{
    struct vgpu_ptr_entry t;
    if (vgpu_cuda_ready() != 0 || real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || !vgpu_untrack(&vgpu_core.ptrs, dptr, &t))
        return real(dptr, stream);
    vgpu_in_driver++;
    CUresult rc = real(dptr, stream);
    vgpu_in_driver--;
    vgpu_untrack_done(&vgpu_core.ptrs, &t, rc);
    return rc;
}

CUresult vgpu_hook_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return vgpu_alloc_async(vgpu_cu.cuMemAllocAsync, NULL, dptr, bytesize, NULL, hStream);
}
VGPU_EXPORT_HOOK(cuMemAllocAsync);

CUresult vgpu_hook_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return vgpu_alloc_async(vgpu_cu.cuMemAllocAsync_ptsz, NULL, dptr, bytesize, NULL, hStream);
}
VGPU_EXPORT_HOOK(cuMemAllocAsync_ptsz);

CUresult vgpu_hook_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    return vgpu_alloc_async(NULL, vgpu_cu.cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream);
}
VGPU_EXPORT_HOOK(cuMemAllocFromPoolAsync);

CUresult vgpu_hook_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    return vgpu_alloc_async(NULL, vgpu_cu.cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool,
                            hStream);
}
VGPU_EXPORT_HOOK(cuMemAllocFromPoolAsync_ptsz);

CUresult vgpu_hook_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return vgpu_free_async(vgpu_cu.cuMemFreeAsync, dptr, hStream);
}
VGPU_EXPORT_HOOK(cuMemFreeAsync);

CUresult vgpu_hook_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return vgpu_free_async(vgpu_cu.cuMemFreeAsync_ptsz, dptr, hStream);
}
VGPU_EXPORT_HOOK(cuMemFreeAsync_ptsz);

/* ---- virtual memory management ----------------------------------------------------------------- */

CUresult vgpu_hook_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || handle == NULL || prop == NULL ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return vgpu_cu.cuMemCreate(handle, size, prop, flags);
    if (vgpu_core_ready() != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int e = vgpu_entry_of_ordinal(prop->location.id);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMemCreate(handle, size, prop, flags);
    if (e < 0 || vgpu_admit(e, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemCreate(handle, size, prop, flags);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, size);
        return rc;
    }
    vgpu_track(&vgpu_core.handles, *handle, size, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemCreate);

CUresult vgpu_hook_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct vgpu_ptr_entry t;
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || !vgpu_untrack(&vgpu_core.handles, handle, &t))
        return vgpu_cu.cuMemRelease(handle);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemRelease(handle);
    vgpu_in_driver--;
    vgpu_untrack_done(&vgpu_core.handles, &t, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuMemRelease);

/* ---- arrays: size from the descriptor --------------------------------------------------------- */

static uint64_t vgpu_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default: /* 32-bit formats, and formats this table lacks: counted as 4 bytes a channel */
        return 4;
    }
}

#define VGPU_ARRAY3D_LAYERED 0x01u

/* Bytes of one level (or the whole array); UINT64_MAX on overflow. */
static uint64_t vgpu_array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                                 unsigned channels)
{
    uint64_t b = vgpu_format_bytes(f) * (channels == 0 ? 1 : channels);
    if (__builtin_mul_overflow(b, w == 0 ? 1 : w, &b) ||
        __builtin_mul_overflow(b, h == 0 ? 1 : h, &b) ||
        __builtin_mul_overflow(b, d == 0 ? 1 : d, &b))
        return UINT64_MAX;
    return b;
}

static uint64_t vgpu_mipmapped_bytes(const CUDA_ARRAY3D_DESCRIPTOR *a, unsigned levels)
{
    uint64_t total = 0, w = a->Width, h = a->Height, d = a->Depth;
    int layered = (a->Flags & VGPU_ARRAY3D_LAYERED) != 0;
    for (unsigned l = 0; l < (levels == 0 ? 1 : levels); l++) {
        uint64_t b = vgpu_array_bytes(w, h, d, a->Format, a->NumChannels);
        if (b == UINT64_MAX || __builtin_add_overflow(total, b, &total))
            return UINT64_MAX;
        w = w > 1 ? w / 2 : w;
        h = h > 1 ? h / 2 : h;
        d = (d > 1 && !layered) ? d / 2 : d;
    }
    return total;
}

/* Admit bytes for an array-like allocation in the current context: entry, -1 pass, -2 refuse. */
static int vgpu_admit_current(uint64_t bytes)
{
    int e = vgpu_alloc_entry();
    if (e == -1)
        return -1;
    if (e < 0 || bytes == UINT64_MAX || vgpu_admit(e, bytes) != 0)
        return -2;
    return e;
}

CUresult vgpu_hook_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || pHandle == NULL || pAllocateArray == NULL)
        return vgpu_cu.cuArrayCreate_v2(pHandle, pAllocateArray);
    const CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
    uint64_t bytes = vgpu_array_bytes(a->Width, a->Height, 1, a->Format, a->NumChannels);
    int e = vgpu_admit_current(bytes);
    if (e == -1)
        return vgpu_cu.cuArrayCreate_v2(pHandle, pAllocateArray);
    if (e < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArrayCreate_v2(pHandle, pAllocateArray);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytes);
        return rc;
    }
    vgpu_track(&vgpu_core.arrays, (uint64_t)(uintptr_t)*pHandle, bytes, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuArrayCreate_v2);

CUresult vgpu_hook_cuArray3DCreate_v2(CUarray *pHandle,
                                      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || pHandle == NULL || pAllocateArray == NULL)
        return vgpu_cu.cuArray3DCreate_v2(pHandle, pAllocateArray);
    const CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
    uint64_t bytes = vgpu_array_bytes(a->Width, a->Height, a->Depth, a->Format, a->NumChannels);
    int e = vgpu_admit_current(bytes);
    if (e == -1)
        return vgpu_cu.cuArray3DCreate_v2(pHandle, pAllocateArray);
    if (e < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArray3DCreate_v2(pHandle, pAllocateArray);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytes);
        return rc;
    }
    vgpu_track(&vgpu_core.arrays, (uint64_t)(uintptr_t)*pHandle, bytes, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuArray3DCreate_v2);

CUresult vgpu_hook_cuArrayDestroy(CUarray hArray)
{
    struct vgpu_ptr_entry t;
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || !vgpu_untrack(&vgpu_core.arrays, (uint64_t)(uintptr_t)hArray, &t))
        return vgpu_cu.cuArrayDestroy(hArray);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArrayDestroy(hArray);
    vgpu_in_driver--;
    vgpu_untrack_done(&vgpu_core.arrays, &t, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuArrayDestroy);

CUresult vgpu_hook_cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                          const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                          unsigned int numMipmapLevels)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || pHandle == NULL || pMipmappedArrayDesc == NULL)
        return vgpu_cu.cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    uint64_t bytes = vgpu_mipmapped_bytes(pMipmappedArrayDesc, numMipmapLevels);
    int e = vgpu_admit_current(bytes);
    if (e == -1)
        return vgpu_cu.cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    if (e < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    vgpu_in_driver--;
    if (rc != CUDA_SUCCESS) {
        vgpu_release(e, bytes);
        return rc;
    }
    vgpu_track(&vgpu_core.arrays, (uint64_t)(uintptr_t)*pHandle, bytes, e);
    return rc;
}
VGPU_EXPORT_HOOK(cuMipmappedArrayCreate);

CUresult vgpu_hook_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    struct vgpu_ptr_entry t;
    uint64_t key = (uint64_t)(uintptr_t)hMipmappedArray;
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_bypass() || !vgpu_untrack(&vgpu_core.arrays, key, &t))
        return vgpu_cu.cuMipmappedArrayDestroy(hMipmappedArray);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMipmappedArrayDestroy(hMipmappedArray);
    vgpu_in_driver--;
    vgpu_untrack_done(&vgpu_core.arrays, &t, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuMipmappedArrayDestroy);

/* ---- contexts: each process's overhead, measured once per device ------------------------------- */

CUresult vgpu_hook_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_bypass() && vgpu_core_ready() == 0)
        vgpu_context_before(vgpu_entry_of(dev));
    CUresult rc = vgpu_cu.cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc != CUDA_SUCCESS || vgpu_bypass() || vgpu_core_ready() != 0 ||
        vgpu_charge_context(vgpu_entry_of(dev)) == 0)
        return rc;
    /* the context does not fit the container's slice: undo it, as a full device would */
    if (vgpu_cu.cuDevicePrimaryCtxRelease_v2 != NULL)
        vgpu_cu.cuDevicePrimaryCtxRelease_v2(dev);
    *pctx = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
}
VGPU_EXPORT_HOOK(cuDevicePrimaryCtxRetain);

CUresult vgpu_hook_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_bypass() && vgpu_core_ready() == 0)
        vgpu_context_before(vgpu_entry_of(dev));
    CUresult rc = vgpu_cu.cuCtxCreate_v2(pctx, flags, dev);
    if (rc != CUDA_SUCCESS || vgpu_bypass() || vgpu_core_ready() != 0 ||
        vgpu_charge_context(vgpu_entry_of(dev)) == 0)
        return rc;
    if (vgpu_cu.cuCtxDestroy_v2 != NULL)
        vgpu_cu.cuCtxDestroy_v2(*pctx);
    *pctx = NULL;
    return CUDA_ERROR_OUT_OF_MEMORY;
}
VGPU_EXPORT_HOOK(cuCtxCreate_v2);

/* ---- memory queries: the container's slice ----------------------------------------------------- */

CUresult vgpu_hook_cuMemGetInfo_v2(size_t *free, size_t *total)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_cu.cuMemGetInfo_v2(free, total);
    if (rc != CUDA_SUCCESS || free == NULL || total == NULL || vgpu_bypass() ||
        vgpu_core_ready() != 0)
        return rc;
    int e = vgpu_current_entry();
    if (e == VGPU_ENTRY_REFUSE)
        *free = 0; /* a device with no entry admits nothing */
    if (e < 0)
        return rc;
    vgpu_maybe_reclaim();
    struct vgpu_mem_view v = vgpu_budget_view(vgpu_core.region.r, (unsigned)e, *free, *total);
    *free = (size_t)v.free;
    *total = (size_t)v.total;
    return rc;
}
VGPU_EXPORT_HOOK(cuMemGetInfo_v2);

CUresult vgpu_hook_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = vgpu_cu.cuDeviceTotalMem_v2(bytes, dev);
    if (rc != CUDA_SUCCESS || bytes == NULL || vgpu_bypass() || vgpu_core_ready() != 0)
        return rc;
    int e = vgpu_entry_of(dev);
    if (e >= 0)
        *bytes = (size_t)vgpu_budget_view(vgpu_core.region.r, (unsigned)e, *bytes, *bytes).total;
    return rc;
}
VGPU_EXPORT_HOOK(cuDeviceTotalMem_v2);
