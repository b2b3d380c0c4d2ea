/*
 * cuda_api_functions.h - X-macro list of the CUDA driver entry points gpuwarden knows, under
 * their ABI symbol names.  No include guard: define GW_CUDA_FN(name, params) and include it.
 * Every entry returns CUresult.  The types come from cuda_api.h (or, in the header test, from
 * NVIDIA's cuda.h, which is how the prototypes are checked against the real ones).
 */
/* initialization, version, errors, entry points */
GW_CUDA_FN(cuInit, (unsigned int Flags))
GW_CUDA_FN(cuDriverGetVersion, (int *driverVersion))
GW_CUDA_FN(cuGetErrorName, (CUresult error, const char **pStr))
GW_CUDA_FN(cuGetErrorString, (CUresult error, const char **pStr))
GW_CUDA_FN(cuGetProcAddress, (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))
GW_CUDA_FN(cuGetProcAddress_v2, (const char *symbol, void **pfn, int cudaVersion,
                                 cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus))
GW_CUDA_FN(cuGetExportTable, (const void **ppExportTable, const CUuuid *pExportTableId))
/* devices */
GW_CUDA_FN(cuDeviceGet, (CUdevice *device, int ordinal))
GW_CUDA_FN(cuDeviceGetCount, (int *count))
GW_CUDA_FN(cuDeviceGetName, (char *name, int len, CUdevice dev))
GW_CUDA_FN(cuDeviceGetUuid, (CUuuid *uuid, CUdevice dev))
GW_CUDA_FN(cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev))
GW_CUDA_FN(cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))
GW_CUDA_FN(cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev))
/* contexts */
GW_CUDA_FN(cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev))
GW_CUDA_FN(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))
GW_CUDA_FN(cuDevicePrimaryCtxReset_v2, (CUdevice dev))
GW_CUDA_FN(cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active))
GW_CUDA_FN(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev))
GW_CUDA_FN(cuCtxDestroy_v2, (CUcontext ctx))
GW_CUDA_FN(cuCtxSetCurrent, (CUcontext ctx))
GW_CUDA_FN(cuCtxGetCurrent, (CUcontext *pctx))
GW_CUDA_FN(cuCtxGetDevice, (CUdevice *device))
GW_CUDA_FN(cuCtxSynchronize, (void))
GW_CUDA_FN(cuCtxPushCurrent_v2, (CUcontext ctx))
GW_CUDA_FN(cuCtxPopCurrent_v2, (CUcontext *pctx))
/* memory */
GW_CUDA_FN(cuMemGetInfo_v2, (size_t *free, size_t *total))
GW_CUDA_FN(cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize))
GW_CUDA_FN(cuMemAllocPitch_v2, (CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                size_t Height, unsigned int ElementSizeBytes))
GW_CUDA_FN(cuMemAllocManaged, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags))
GW_CUDA_FN(cuMemFree_v2, (CUdeviceptr dptr))
/* stream-ordered allocator */
GW_CUDA_FN(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream))
GW_CUDA_FN(cuMemAllocFromPoolAsync, (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                     CUstream hStream))
GW_CUDA_FN(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream))
GW_CUDA_FN(cuMemPoolCreate, (CUmemoryPool *pool, const CUmemPoolProps *poolProps))
GW_CUDA_FN(cuMemPoolDestroy, (CUmemoryPool pool))
GW_CUDA_FN(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))
GW_CUDA_FN(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value))
GW_CUDA_FN(cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value))
GW_CUDA_FN(cuDeviceGetDefaultMemPool, (CUmemoryPool *pool_out, CUdevice dev))
GW_CUDA_FN(cuDeviceGetMemPool, (CUmemoryPool *pool, CUdevice dev))
/* virtual memory management */
GW_CUDA_FN(cuMemCreate, (CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags))
GW_CUDA_FN(cuMemRelease, (CUmemGenericAllocationHandle handle))
GW_CUDA_FN(cuMemAddressReserve, (CUdeviceptr *ptr, size_t size, size_t alignment,
                                 CUdeviceptr addr, unsigned long long flags))
GW_CUDA_FN(cuMemAddressFree, (CUdeviceptr ptr, size_t size))
GW_CUDA_FN(cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags))
GW_CUDA_FN(cuMemUnmap, (CUdeviceptr ptr, size_t size))
GW_CUDA_FN(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                            size_t count))
GW_CUDA_FN(cuMemGetAllocationGranularity, (size_t *granularity, const CUmemAllocationProp *prop,
                                           CUmemAllocationGranularity_flags option))
/* arrays */
GW_CUDA_FN(cuArrayCreate_v2, (CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray))
GW_CUDA_FN(cuArray3DCreate_v2, (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray))
GW_CUDA_FN(cuArrayDestroy, (CUarray hArray))
GW_CUDA_FN(cuMipmappedArrayCreate, (CUmipmappedArray *pHandle,
                                    const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                    unsigned int numMipmapLevels))
GW_CUDA_FN(cuMipmappedArrayDestroy, (CUmipmappedArray hMipmappedArray))
/* streams and events */
GW_CUDA_FN(cuStreamCreate, (CUstream *phStream, unsigned int Flags))
GW_CUDA_FN(cuStreamCreateWithPriority, (CUstream *phStream, unsigned int flags, int priority))
GW_CUDA_FN(cuStreamDestroy_v2, (CUstream hStream))
GW_CUDA_FN(cuStreamSynchronize, (CUstream hStream))
GW_CUDA_FN(cuStreamQuery, (CUstream hStream))
GW_CUDA_FN(cuEventCreate, (CUevent *phEvent, unsigned int Flags))
GW_CUDA_FN(cuEventRecord, (CUevent hEvent, CUstream hStream))
GW_CUDA_FN(cuEventSynchronize, (CUevent hEvent))
GW_CUDA_FN(cuEventQuery, (CUevent hEvent))
GW_CUDA_FN(cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd))
GW_CUDA_FN(cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd))
GW_CUDA_FN(cuEventDestroy_v2, (CUevent hEvent))
/* modules and launches */
GW_CUDA_FN(cuModuleLoadData, (CUmodule *module, const void *image))
GW_CUDA_FN(cuModuleUnload, (CUmodule hmod))
GW_CUDA_FN(cuModuleGetFunction, (CUfunction *hfunc, CUmodule hmod, const char *name))
GW_CUDA_FN(cuLaunchKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                            unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                            unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                            void **kernelParams, void **extra))
GW_CUDA_FN(cuLaunchKernel_ptsz, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                 unsigned int gridDimZ, unsigned int blockDimX,
                                 unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, CUstream hStream,
                                 void **kernelParams, void **extra))
GW_CUDA_FN(cuLaunchKernelEx, (const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                              void **extra))
GW_CUDA_FN(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *config, CUfunction f,
                                   void **kernelParams, void **extra))
GW_CUDA_FN(cuLaunchCooperativeKernel, (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX,
                                       unsigned int blockDimY, unsigned int blockDimZ,
                                       unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams))
/* graphs */
GW_CUDA_FN(cuGraphCreate, (CUgraph *phGraph, unsigned int flags))
GW_CUDA_FN(cuGraphAddKernelNode_v2, (CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams))
GW_CUDA_FN(cuGraphDestroy, (CUgraph hGraph))
GW_CUDA_FN(cuGraphInstantiateWithFlags, (CUgraphExec *phGraphExec, CUgraph hGraph,
                                         unsigned long long flags))
GW_CUDA_FN(cuGraphExecDestroy, (CUgraphExec hGraphExec))
GW_CUDA_FN(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))
