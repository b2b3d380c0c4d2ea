/* hooks_launch.c: the launch entry points.  For now plain forwarders to the real driver (no
 * compute limit); the compute limiter (issue 7) owns this file and gates launches here. */
#include "hook.h"

CUresult vgpu_hook_cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                  unsigned int gridDimZ, unsigned int blockDimX,
                                  unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream,
                                  void **kernelParams, void **extra)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                  blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}
VGPU_EXPORT_HOOK(cuLaunchKernel);

CUresult vgpu_hook_cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX,
                                       unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                       blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}
VGPU_EXPORT_HOOK(cuLaunchKernel_ptsz);

CUresult vgpu_hook_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                    void **kernelParams, void **extra)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchKernelEx(config, f, kernelParams, extra);
}
VGPU_EXPORT_HOOK(cuLaunchKernelEx);

CUresult vgpu_hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                         void **kernelParams, void **extra)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchKernelEx_ptsz(config, f, kernelParams, extra);
}
VGPU_EXPORT_HOOK(cuLaunchKernelEx_ptsz);

CUresult vgpu_hook_cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                             unsigned int gridDimY, unsigned int gridDimZ,
                                             unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes,
                                             CUstream hStream, void **kernelParams)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                                             blockDimY, blockDimZ, sharedMemBytes, hStream,
                                             kernelParams);
}
VGPU_EXPORT_HOOK(cuLaunchCooperativeKernel);

CUresult vgpu_hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                  unsigned int gridDimY, unsigned int gridDimZ,
                                                  unsigned int blockDimX, unsigned int blockDimY,
                                                  unsigned int blockDimZ,
                                                  unsigned int sharedMemBytes, CUstream hStream,
                                                  void **kernelParams)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuLaunchCooperativeKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX,
                                                  blockDimY, blockDimZ, sharedMemBytes, hStream,
                                                  kernelParams);
}
VGPU_EXPORT_HOOK(cuLaunchCooperativeKernel_ptsz);

CUresult vgpu_hook_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuGraphLaunch(hGraphExec, hStream);
}
VGPU_EXPORT_HOOK(cuGraphLaunch);

CUresult vgpu_hook_cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return vgpu_cu.cuGraphLaunch_ptsz(hGraphExec, hStream);
}
VGPU_EXPORT_HOOK(cuGraphLaunch_ptsz);
