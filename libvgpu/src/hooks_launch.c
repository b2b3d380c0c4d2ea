/* hooks_launch.c: every launch path the compute limiter governs (docs/compute.md).
 *
 * Every hook has the same shape:
 *   fast path (one relaxed load, compute.h) -> real call;
 *   otherwise: real driver loaded? -> re-entry -> gate (may wait) -> real call -> leave.
 * The real call is marked as "in the driver", so a driver whose entry points call each other
 * through their exported names (the simulator's _ptsz variants do) is gated once, not twice.
 * The cost signature of a kernel launch is its function and geometry; of a graph launch, the
 * executable graph.  A `_ptsz` launch on stream 0 goes to the per-thread default stream, and so
 * do the gate's measurements. */
#include <stdint.h>

#include "compute.h"
#include "core.h"
#include "hook.h"
#include "limiter.h"

#define VGPU_GRAPH_KEY_MARK 0xffffffffu /* no kernel has this geometry */

static CUstream vgpu_ptds(CUstream s)
{
    return s == NULL ? CU_STREAM_PER_THREAD : s;
}

static uint64_t vgpu_kernel_key(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned shmem)
{
    return lim_cost_key((uint64_t)(uintptr_t)f, gx, gy, gz, bx, by, bz, shmem);
}

static uint64_t vgpu_graph_key(CUgraphExec g)
{
    return lim_cost_key((uint64_t)(uintptr_t)g, VGPU_GRAPH_KEY_MARK, VGPU_GRAPH_KEY_MARK,
                        VGPU_GRAPH_KEY_MARK, 0, 0, 0, 0);
}

/* ---- cuLaunchKernel -------------------------------------------------------------------------- */

CUresult vgpu_hook_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                  unsigned int bx, unsigned int by, unsigned int bz,
                                  unsigned int shmem, CUstream s, void **params, void **extra)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchKernel);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_kernel_key(f, gx, gy, gz, bx, by, bz, shmem), s);
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, s, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchKernel);

CUresult vgpu_hook_cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                       unsigned int gz, unsigned int bx, unsigned int by,
                                       unsigned int bz, unsigned int shmem, CUstream s,
                                       void **params, void **extra)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchKernel_ptsz);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_kernel_key(f, gx, gy, gz, bx, by, bz, shmem), vgpu_ptds(s));
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, vgpu_ptds(s), rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchKernel_ptsz);

/* ---- cuLaunchKernelEx -------------------------------------------------------------------------- */

static uint64_t vgpu_config_key(const CUlaunchConfig *c, CUfunction f)
{
    return vgpu_kernel_key(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                           c->blockDimZ, c->sharedMemBytes);
}

CUresult vgpu_hook_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                    void **extra)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchKernelEx(config, f, params, extra);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchKernelEx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver || config == NULL) /* the driver reports a NULL config */
        return vgpu_cu.cuLaunchKernelEx(config, f, params, extra);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_config_key(config, f), config->hStream);
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchKernelEx(config, f, params, extra);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, config->hStream, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchKernelEx);

CUresult vgpu_hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                         void **params, void **extra)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchKernelEx_ptsz(config, f, params, extra);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchKernelEx_ptsz);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver || config == NULL)
        return vgpu_cu.cuLaunchKernelEx_ptsz(config, f, params, extra);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_config_key(config, f), vgpu_ptds(config->hStream));
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchKernelEx_ptsz(config, f, params, extra);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, vgpu_ptds(config->hStream), rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchKernelEx_ptsz);

/* ---- cooperative launches -------------------------------------------------------------------- */

CUresult vgpu_hook_cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shmem, CUstream s,
                                             void **params)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchCooperativeKernel);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_kernel_key(f, gx, gy, gz, bx, by, bz, shmem), s);
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, s, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchCooperativeKernel);

CUresult vgpu_hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                  unsigned int gz, unsigned int bx,
                                                  unsigned int by, unsigned int bz,
                                                  unsigned int shmem, CUstream s, void **params)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s,
                                                      params);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuLaunchCooperativeKernel_ptsz);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s,
                                                      params);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_kernel_key(f, gx, gy, gz, bx, by, bz, shmem), vgpu_ptds(s));
    vgpu_in_driver++;
    rc = vgpu_cu.cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, vgpu_ptds(s), rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuLaunchCooperativeKernel_ptsz);

/* ---- graphs ------------------------------------------------------------------------------------ */

CUresult vgpu_hook_cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuGraphLaunch(exec, s);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuGraphLaunch);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuGraphLaunch(exec, s);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_graph_key(exec), s);
    vgpu_in_driver++;
    rc = vgpu_cu.cuGraphLaunch(exec, s);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, s, rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuGraphLaunch);

CUresult vgpu_hook_cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s)
{
    if (vgpu_compute_fast())
        return vgpu_cu.cuGraphLaunch_ptsz(exec, s);
    CUresult rc = vgpu_compute_ready((void *)vgpu_cu.cuGraphLaunch_ptsz);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (vgpu_in_driver)
        return vgpu_cu.cuGraphLaunch_ptsz(exec, s);
    struct vgpu_gate g;
    vgpu_compute_enter(&g, vgpu_graph_key(exec), vgpu_ptds(s));
    vgpu_in_driver++;
    rc = vgpu_cu.cuGraphLaunch_ptsz(exec, s);
    vgpu_in_driver--;
    vgpu_compute_leave(&g, vgpu_ptds(s), rc);
    return rc;
}
VGPU_EXPORT_HOOK(cuGraphLaunch_ptsz);
