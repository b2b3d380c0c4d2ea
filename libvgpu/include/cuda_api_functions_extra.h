/*
 * cuda_api_functions_extra.h - X-macro list, GW_CUDA_FN(name, (params)), of driver entry points
 * that libvgpu interposes but the simulator need not implement (per-thread-default-stream
 * variants).  Same form and rules as cuda_api_functions.h; kept apart so that code generating
 * one definition per entry of that list (the simulator) is not affected.
 */
GW_CUDA_FN(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned int gridDimX,
                                            unsigned int gridDimY, unsigned int gridDimZ,
                                            unsigned int blockDimX, unsigned int blockDimY,
                                            unsigned int blockDimZ, unsigned int sharedMemBytes,
                                            CUstream hStream, void **kernelParams))
GW_CUDA_FN(cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream))
GW_CUDA_FN(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream))
GW_CUDA_FN(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                          CUstream hStream))
GW_CUDA_FN(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream))
GW_CUDA_FN(cuStreamSynchronize_ptsz, (CUstream hStream))
