/* hooks_sync.c: the synchronising entry points (docs/compute.md).  A synchronise that waited
 * returns as the work it waited for ends: measured or not, that is where a light container's
 * claim runs on from (vgpu_compute_synced; limiter.h, LIM_LIGHT_CLAIM_JOIN_NS).  The ticker's
 * watch sees the end of measured work only; a kernel launched unmeasured (its signature known)
 * has no event it can query, so its claim ended by its estimate, and a loop's next launch,
 * made as the synchronise after a kernel that ran long returned, began a claim with a
 * request's credit.
 *
 * Each hook: fast path (one relaxed load, compute.h) -> real call; otherwise the real call,
 * timed, marked as "in the driver" (a driver entry point calling another through its exported
 * name is seen once), then vgpu_compute_synced. */
#include <stdint.h>

#include "compute.h"
#include "core.h"
#include "hook.h"

/* The real call `call` to `real`, timed for vgpu_compute_synced. */
#define VGPU_SYNC_HOOK_BODY(real, call)                                                            \
    do {                                                                                           \
        if (vgpu_compute_fast())                                                                   \
            return call;                                                                           \
        CUresult rc_ = vgpu_compute_ready((void *)(real));                                         \
        if (rc_ != CUDA_SUCCESS)                                                                   \
            return rc_;                                                                            \
        if (vgpu_in_driver)                                                                        \
            return call;                                                                           \
        uint64_t from_ = vgpu_compute_now();                                                       \
        vgpu_in_driver++;                                                                          \
        rc_ = call;                                                                                \
        vgpu_in_driver--;                                                                          \
        vgpu_compute_synced(from_, rc_);                                                           \
        return rc_;                                                                                \
    } while (0)

CUresult vgpu_hook_cuCtxSynchronize(void)
{
    VGPU_SYNC_HOOK_BODY(vgpu_cu.cuCtxSynchronize, vgpu_cu.cuCtxSynchronize());
}
VGPU_EXPORT_HOOK(cuCtxSynchronize);

CUresult vgpu_hook_cuStreamSynchronize(CUstream s)
{
    VGPU_SYNC_HOOK_BODY(vgpu_cu.cuStreamSynchronize, vgpu_cu.cuStreamSynchronize(s));
}
VGPU_EXPORT_HOOK(cuStreamSynchronize);

CUresult vgpu_hook_cuStreamSynchronize_ptsz(CUstream s)
{
    VGPU_SYNC_HOOK_BODY(vgpu_cu.cuStreamSynchronize_ptsz, vgpu_cu.cuStreamSynchronize_ptsz(s));
}
VGPU_EXPORT_HOOK(cuStreamSynchronize_ptsz);

CUresult vgpu_hook_cuEventSynchronize(CUevent e)
{
    VGPU_SYNC_HOOK_BODY(vgpu_cu.cuEventSynchronize, vgpu_cu.cuEventSynchronize(e));
}
VGPU_EXPORT_HOOK(cuEventSynchronize);
