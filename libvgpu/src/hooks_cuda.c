/* hooks_cuda.c: the CUDA memory hooks.  Every allocation and free hook has the same shape, the
 * synchronous ones and the stream-ordered ones alike:
 *   gate (real driver loaded? arguments, re-entry, which region entry, admit the bytes)
 *   -> real call -> commit (count the bytes under the new handle, or give them back).
 * The gates and commits are below; a hook names only its entry point, its size and its table.
 * What each path counts is documented in docs/libvgpu.md. */
#include <stdint.h>

#include "budget.h"
#include "core.h"
#include "hook.h"

/* ---- gates and commits ----------------------------------------------------------------------- */

/* Gate results besides a region entry (>= 0): VGPU_ENTRY_NONE (core.h) call the real entry
 * point as it is; VGPU_ENTRY_REFUSE out of memory; this one: the real driver is not loaded. */
#define VGPU_NOT_READY (-3)

/* What a hook returns for a gate result below VGPU_ENTRY_NONE. */
static CUresult vgpu_refusal(int gate)
{
    return gate == VGPU_NOT_READY ? CUDA_ERROR_NOT_INITIALIZED : CUDA_ERROR_OUT_OF_MEMORY;
}

static int vgpu_bypass(void)
{
    return vgpu_in_driver != 0;
}

/* Where an allocation goes: the region entry of the CUDA device `*ordinal`, or of the current
 * context's device when ordinal is NULL.  `pass` (arguments the hook does not count, such as a
 * NULL out-pointer) and re-entry from inside the driver give VGPU_ENTRY_NONE; a region that
 * could not be mapped at all gives VGPU_ENTRY_REFUSE (safe side). */
static int vgpu_alloc_where(int pass, const int *ordinal)
{
    if (vgpu_cuda_ready() != 0)
        return VGPU_NOT_READY;
    if (pass || vgpu_bypass())
        return VGPU_ENTRY_NONE;
    if (vgpu_core_ready() != 0)
        return VGPU_ENTRY_REFUSE;
    return ordinal != NULL ? vgpu_entry_of_ordinal(*ordinal) : vgpu_current_entry();
}

/* The gate of an allocation of `bytes` whose size is known before the call: the entry that
 * admitted them, or a gate result (vgpu_alloc_where). */
static int vgpu_alloc_gate(int pass, const int *ordinal, uint64_t bytes)
{
    int e = vgpu_alloc_where(pass, ordinal);
    return e >= 0 && vgpu_admit(e, bytes) != 0 ? VGPU_ENTRY_REFUSE : e;
}

/* The gate of an array in the current context: as vgpu_alloc_gate, and a size that overflowed
 * (UINT64_MAX from vgpu_array_bytes) is refused wherever an entry would count it. */
static int vgpu_array_gate(int pass, uint64_t bytes)
{
    int e = vgpu_alloc_where(pass, NULL);
    return e >= 0 && (bytes == UINT64_MAX || vgpu_admit(e, bytes) != 0) ? VGPU_ENTRY_REFUSE : e;
}

/* After the real allocation on admitted entry e returned rc: the bytes stay counted under `key`
 * (the new pointer or handle; read only on success) or are given back. */
static CUresult vgpu_alloc_commit(CUresult rc, int e, uint64_t bytes, struct vgpu_ptrtab *t,
                                  uint64_t key)
{
    if (rc != CUDA_SUCCESS)
        vgpu_release(e, bytes);
    else /* when even the overflow list is out of memory the bytes stay counted (safe side) */
        vgpu_ptrtab_insert(t, key, bytes, (uint32_t)e, 0);
    return rc;
}

/* The gate of a free: 1 when `key` was tracked (forgotten now, before the real free: the driver
 * may reuse it at once; its entry in *out); 0 call the real entry point as it is (never seen,
 * re-entry); VGPU_NOT_READY. */
static int vgpu_free_gate(struct vgpu_ptrtab *t, uint64_t key, struct vgpu_ptr_entry *out)
{
    if (vgpu_cuda_ready() != 0)
        return VGPU_NOT_READY;
    if (vgpu_bypass() || __atomic_load_n(&vgpu_core_state, __ATOMIC_ACQUIRE) != 1)
        return 0;
    return vgpu_ptrtab_remove(t, key, out) == 0;
}

/* After the real free returned rc: the bytes are given back, or tracked again (it failed). */
static CUresult vgpu_free_commit(CUresult rc, struct vgpu_ptrtab *t, const struct vgpu_ptr_entry *e)
{
    if (rc == CUDA_SUCCESS)
        vgpu_release((int)e->dev, e->bytes);
    else
        vgpu_ptrtab_insert(t, e->key, e->bytes, e->dev, e->aux);
    return rc;
}

/* ---- device pointers --------------------------------------------------------------------------- */

CUresult vgpu_hook_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    int e = vgpu_alloc_gate(dptr == NULL, NULL, bytesize);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMemAlloc_v2(dptr, bytesize);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemAlloc_v2(dptr, bytesize);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, bytesize, &vgpu_core.ptrs, rc == CUDA_SUCCESS ? *dptr : 0);
}
VGPU_EXPORT_HOOK(cuMemAlloc_v2);

CUresult vgpu_hook_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    int e = vgpu_alloc_gate(dptr == NULL, NULL, bytesize);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMemAllocManaged(dptr, bytesize, flags);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemAllocManaged(dptr, bytesize, flags);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, bytesize, &vgpu_core.ptrs, rc == CUDA_SUCCESS ? *dptr : 0);
}
VGPU_EXPORT_HOOK(cuMemAllocManaged);

/* The pitch is only known after the call: allocate, then admit pitch x height exactly, and free
 * again when that does not fit (the counter is still never passed). */
CUresult vgpu_hook_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    int e = vgpu_alloc_where(dptr == NULL || pPitch == NULL, NULL);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (e < 0)
        return vgpu_refusal(e);
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
    return vgpu_alloc_commit(rc, e, bytes, &vgpu_core.ptrs, *dptr);
}
VGPU_EXPORT_HOOK(cuMemAllocPitch_v2);

CUresult vgpu_hook_cuMemFree_v2(CUdeviceptr dptr)
{
    struct vgpu_ptr_entry t;
    int g = vgpu_free_gate(&vgpu_core.ptrs, dptr, &t);
    if (g <= 0) /* never seen: pass through unharmed */
        return g < 0 ? vgpu_refusal(g) : vgpu_cu.cuMemFree_v2(dptr);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemFree_v2(dptr);
    vgpu_in_driver--;
    return vgpu_free_commit(rc, &vgpu_core.ptrs, &t);
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
    int e = vgpu_alloc_gate(dptr == NULL, NULL, bytesize);
    if (e < VGPU_ENTRY_NONE)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = real != NULL ? real(dptr, bytesize, stream)
                               : real_pool(dptr, bytesize, pool, stream);
    vgpu_in_driver--;
    if (e < 0)
        return rc;
    return vgpu_alloc_commit(rc, e, bytesize, &vgpu_core.ptrs, rc == CUDA_SUCCESS ? *dptr : 0);
}

static CUresult vgpu_free_async(vgpu_free_async_fn real, CUdeviceptr dptr, CUstream stream)
{
    struct vgpu_ptr_entry t;
    if (vgpu_cuda_ready() != 0 || real == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (vgpu_free_gate(&vgpu_core.ptrs, dptr, &t) <= 0)
        return real(dptr, stream);
    vgpu_in_driver++;
    CUresult rc = real(dptr, stream);
    vgpu_in_driver--;
    return vgpu_free_commit(rc, &vgpu_core.ptrs, &t);
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
    int pass = handle == NULL || prop == NULL || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
    int e = vgpu_alloc_gate(pass, pass ? NULL : &prop->location.id, size);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMemCreate(handle, size, prop, flags);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemCreate(handle, size, prop, flags);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, size, &vgpu_core.handles, rc == CUDA_SUCCESS ? *handle : 0);
}
VGPU_EXPORT_HOOK(cuMemCreate);

CUresult vgpu_hook_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct vgpu_ptr_entry t;
    int g = vgpu_free_gate(&vgpu_core.handles, handle, &t);
    if (g <= 0)
        return g < 0 ? vgpu_refusal(g) : vgpu_cu.cuMemRelease(handle);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMemRelease(handle);
    vgpu_in_driver--;
    return vgpu_free_commit(rc, &vgpu_core.handles, &t);
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

/* The key an array handle is tracked under. */
static uint64_t vgpu_array_key(const void *handle)
{
    return (uint64_t)(uintptr_t)handle;
}

CUresult vgpu_hook_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    const CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
    uint64_t bytes = a != NULL ? vgpu_array_bytes(a->Width, a->Height, 1, a->Format,
                                                  a->NumChannels) : 0;
    int e = vgpu_array_gate(pHandle == NULL || a == NULL, bytes);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuArrayCreate_v2(pHandle, pAllocateArray);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArrayCreate_v2(pHandle, pAllocateArray);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, bytes, &vgpu_core.arrays,
                             rc == CUDA_SUCCESS ? vgpu_array_key(*pHandle) : 0);
}
VGPU_EXPORT_HOOK(cuArrayCreate_v2);

CUresult vgpu_hook_cuArray3DCreate_v2(CUarray *pHandle,
                                      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    const CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
    uint64_t bytes = a != NULL ? vgpu_array_bytes(a->Width, a->Height, a->Depth, a->Format,
                                                  a->NumChannels) : 0;
    int e = vgpu_array_gate(pHandle == NULL || a == NULL, bytes);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuArray3DCreate_v2(pHandle, pAllocateArray);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArray3DCreate_v2(pHandle, pAllocateArray);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, bytes, &vgpu_core.arrays,
                             rc == CUDA_SUCCESS ? vgpu_array_key(*pHandle) : 0);
}
VGPU_EXPORT_HOOK(cuArray3DCreate_v2);

CUresult vgpu_hook_cuArrayDestroy(CUarray hArray)
{
    struct vgpu_ptr_entry t;
    int g = vgpu_free_gate(&vgpu_core.arrays, vgpu_array_key(hArray), &t);
    if (g <= 0)
        return g < 0 ? vgpu_refusal(g) : vgpu_cu.cuArrayDestroy(hArray);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuArrayDestroy(hArray);
    vgpu_in_driver--;
    return vgpu_free_commit(rc, &vgpu_core.arrays, &t);
}
VGPU_EXPORT_HOOK(cuArrayDestroy);

CUresult vgpu_hook_cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                          const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                          unsigned int numMipmapLevels)
{
    const CUDA_ARRAY3D_DESCRIPTOR *a = pMipmappedArrayDesc;
    uint64_t bytes = a != NULL ? vgpu_mipmapped_bytes(a, numMipmapLevels) : 0;
    int e = vgpu_array_gate(pHandle == NULL || a == NULL, bytes);
    if (e == VGPU_ENTRY_NONE)
        return vgpu_cu.cuMipmappedArrayCreate(pHandle, a, numMipmapLevels);
    if (e < 0)
        return vgpu_refusal(e);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMipmappedArrayCreate(pHandle, a, numMipmapLevels);
    vgpu_in_driver--;
    return vgpu_alloc_commit(rc, e, bytes, &vgpu_core.arrays,
                             rc == CUDA_SUCCESS ? vgpu_array_key(*pHandle) : 0);
}
VGPU_EXPORT_HOOK(cuMipmappedArrayCreate);

CUresult vgpu_hook_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    struct vgpu_ptr_entry t;
    int g = vgpu_free_gate(&vgpu_core.arrays, vgpu_array_key(hMipmappedArray), &t);
    if (g <= 0)
        return g < 0 ? vgpu_refusal(g) : vgpu_cu.cuMipmappedArrayDestroy(hMipmappedArray);
    vgpu_in_driver++;
    CUresult rc = vgpu_cu.cuMipmappedArrayDestroy(hMipmappedArray);
    vgpu_in_driver--;
    return vgpu_free_commit(rc, &vgpu_core.arrays, &t);
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
