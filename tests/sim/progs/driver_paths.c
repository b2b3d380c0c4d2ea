/*
 * driver_paths - every entry point of the simulated driver, good paths and error codes.
 * Prints one line per failed expectation and "checked N, failed M"; exits with M (capped).
 * Run with a fresh state of one 1 GiB device (the test sets GPUWARDEN_SIM_MEMORY=1GiB and
 * GPUWARDEN_SIM_CTX_OVERHEAD=0 so the numbers below are exact).
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cudaload.h"

static int checked, failed;

#define EXPECT_RC(call, want)                                                                 \
    do {                                                                                      \
        CUresult got_ = (call);                                                               \
        checked++;                                                                            \
        if (got_ != (want)) {                                                                 \
            failed++;                                                                         \
            printf("line %d: %s -> %d, expected %s (%d)\n", __LINE__, #call, (int)got_, #want, \
                   (int)(want));                                                              \
        }                                                                                     \
    } while (0)

#define EXPECT(cond)                                                                          \
    do {                                                                                      \
        checked++;                                                                            \
        if (!(cond)) {                                                                        \
            failed++;                                                                         \
            printf("line %d: expected %s\n", __LINE__, #cond);                                \
        }                                                                                     \
    } while (0)

#define OK(call) EXPECT_RC(call, CUDA_SUCCESS)
#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    p_cuMemGetInfo_v2(&f, &t);
    return f;
}

static void before_init(void)
{
    int v = 0, n = 0;
    CUdeviceptr p;
    CUcontext c;
    OK(p_cuDriverGetVersion(&v));
    EXPECT(v == 13000);
    EXPECT_RC(p_cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(p_cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(p_cuCtxGetCurrent(&c), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(p_cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuInit(0));
    OK(p_cuInit(0)); /* idempotent */
}

static void errors_and_proc_address(void)
{
    const char *s = NULL;
    OK(p_cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    EXPECT(s && strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
    OK(p_cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    EXPECT(s && strcmp(s, "invalid argument") == 0);
    EXPECT_RC(p_cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    EXPECT(s == NULL);
    EXPECT_RC(p_cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);

    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    OK(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st));
    EXPECT(fn == dlsym(cuda_handle, "cuMemAlloc_v2") && st == CU_GET_PROC_ADDRESS_SUCCESS);
    OK(p_cuGetProcAddress("cuMemAlloc", &fn, 12000, 0));
    EXPECT(fn == dlsym(cuda_handle, "cuMemAlloc_v2"));
    OK(p_cuGetProcAddress_v2("cuInit", &fn, 12000, 0, &st));
    EXPECT(fn == (void *)p_cuInit);
    OK(p_cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, NULL));
    EXPECT(fn == (void *)p_cuGetProcAddress_v2);
    OK(p_cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, NULL));
    EXPECT(fn == (void *)p_cuGetProcAddress);
    OK(p_cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    EXPECT(fn == (void *)p_cuLaunchKernel_ptsz);
    OK(p_cuGetProcAddress_v2("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    EXPECT(fn == (void *)p_cuLaunchKernel);
    OK(p_cuGetProcAddress_v2("cuMemCreate", &fn, 12000, 0, NULL));
    EXPECT(fn == (void *)p_cuMemCreate);
    OK(p_cuGetProcAddress_v2("cuDeviceGetUuid", &fn, 12000, 0, NULL));
    EXPECT(fn == (void *)p_cuDeviceGetUuid_v2);
    OK(p_cuGetProcAddress_v2("cuGraphInstantiate", &fn, 12000, 0, NULL));
    EXPECT(fn == (void *)p_cuGraphInstantiateWithFlags);
    EXPECT_RC(p_cuGetProcAddress_v2("cuNoSuchThing", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
    EXPECT(fn == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT_RC(p_cuGetProcAddress_v2(NULL, &fn, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuGetProcAddress_v2("cuInit", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);

    const void *table = (const void *)1;
    CUuuid id;
    memset(&id, 0, sizeof id);
    EXPECT_RC(p_cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT(table == NULL);
}

static void devices(void)
{
    int n = 0, v = 0;
    CUdevice d = -1;
    char name[128];
    CUuuid u1, u2;
    size_t total = 0;
    OK(p_cuDeviceGetCount(&n));
    EXPECT(n == 1);
    EXPECT_RC(p_cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuDeviceGet(&d, 0));
    EXPECT(d == 0);
    EXPECT_RC(p_cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(p_cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(p_cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuDeviceGetName(name, sizeof name, 0));
    EXPECT(strstr(name, "H200") != NULL);
    OK(p_cuDeviceGetName(name, 6, 0));
    EXPECT(strlen(name) == 5);
    EXPECT_RC(p_cuDeviceGetName(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuDeviceGetName(name, sizeof name, 3), CUDA_ERROR_INVALID_DEVICE);
    OK(p_cuDeviceGetUuid(&u1, 0));
    OK(p_cuDeviceGetUuid_v2(&u2, 0));
    EXPECT(memcmp(&u1, &u2, sizeof u1) == 0);
    EXPECT_RC(p_cuDeviceGetUuid_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuDeviceTotalMem_v2(&total, 0));
    EXPECT(total == 1 * GiB);
    EXPECT_RC(p_cuDeviceTotalMem_v2(&total, 9), CUDA_ERROR_INVALID_DEVICE);
    OK(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    EXPECT(v == 132);
    OK(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    EXPECT(v == 9);
    OK(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
    EXPECT(v == 1);
    EXPECT_RC(p_cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5),
              CUDA_ERROR_INVALID_DEVICE);
}

static void contexts(void)
{
    CUcontext c = (CUcontext)1, p1, p2, created, popped;
    CUdevice d;
    CUdeviceptr ptr;
    size_t f, t;
    unsigned flags;
    int active;
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == NULL);
    EXPECT_RC(p_cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemAlloc_v2(&ptr, 1), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxPopCurrent_v2(&popped), CUDA_ERROR_INVALID_CONTEXT);
    OK(p_cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT(active == 0);
    EXPECT_RC(p_cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuDevicePrimaryCtxRetain(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuDevicePrimaryCtxRetain(&p1, 4), CUDA_ERROR_INVALID_DEVICE);
    OK(p_cuDevicePrimaryCtxRetain(&p1, 0));
    OK(p_cuDevicePrimaryCtxRetain(&p2, 0));
    EXPECT(p1 == p2);
    OK(p_cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT(active == 1);
    OK(p_cuCtxSetCurrent(p1));
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == p1);
    OK(p_cuCtxGetDevice(&d));
    EXPECT(d == 0);

    /* A created context is pushed and current; destroying it frees its memory. */
    size_t before = free_now();
    EXPECT_RC(p_cuCtxCreate_v2(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuCtxCreate_v2(&created, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    OK(p_cuCtxCreate_v2(&created, 0, 0));
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == created);
    OK(p_cuMemAlloc_v2(&ptr, 64 * MiB));
    EXPECT(free_now() == before - 64 * MiB);
    OK(p_cuCtxPopCurrent_v2(&popped));
    EXPECT(popped == created);
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == p1);
    OK(p_cuCtxPushCurrent_v2(created));
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == created);
    OK(p_cuCtxDestroy_v2(created));
    OK(p_cuCtxGetCurrent(&c));
    EXPECT(c == p1);
    EXPECT(free_now() == before);
    EXPECT_RC(p_cuCtxDestroy_v2(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxDestroy_v2(NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuCtxPushCurrent_v2(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxSetCurrent(created), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(p_cuCtxDestroy_v2(p1), CUDA_ERROR_INVALID_CONTEXT); /* primary: release it */

    /* Reset frees the primary context's memory; the context comes back for its holders. */
    OK(p_cuMemAlloc_v2(&ptr, 32 * MiB));
    EXPECT(free_now() == before - 32 * MiB);
    OK(p_cuDevicePrimaryCtxReset_v2(0));
    EXPECT(free_now() == before);
    EXPECT_RC(p_cuMemFree_v2(ptr), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuDevicePrimaryCtxRelease_v2(0)); /* one retain left */
    OK(p_cuCtxSynchronize());
}

static void memory(void)
{
    CUdeviceptr a, b, c;
    size_t pitch = 0, f0 = free_now(), t;
    EXPECT_RC(p_cuMemAlloc_v2(NULL, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemAlloc_v2(&a, 100 * MiB));
    OK(p_cuMemAlloc_v2(&b, 1000)); /* charged in 512-byte units */
    EXPECT(a != b && a != 0);
    EXPECT(free_now() == f0 - 100 * MiB - 1024);
    EXPECT_RC(p_cuMemGetInfo_v2(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFree_v2(b));
    EXPECT_RC(p_cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemFree_v2(0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemFree_v2(0xdead000), CUDA_ERROR_INVALID_VALUE);
    /* Pitch rounds rows up to 512 bytes. */
    OK(p_cuMemAllocPitch_v2(&b, &pitch, 1000, 10, 4));
    EXPECT(pitch == 1024);
    EXPECT(free_now() == f0 - 100 * MiB - 10240);
    EXPECT_RC(p_cuMemAllocPitch_v2(&c, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemAllocPitch_v2(&c, NULL, 1000, 10, 4), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFree_v2(b));
    OK(p_cuMemAllocManaged(&c, 8 * MiB, CU_MEM_ATTACH_GLOBAL));
    EXPECT(free_now() == f0 - 108 * MiB);
    EXPECT_RC(p_cuMemAllocManaged(&b, 8 * MiB, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemFree_v2(c));
    /* A full device says OUT_OF_MEMORY and stays usable. */
    EXPECT_RC(p_cuMemAlloc_v2(&b, f0 - 100 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(free_now() == f0 - 100 * MiB);
    OK(p_cuMemAlloc_v2(&b, f0 - 100 * MiB));
    EXPECT(free_now() == 0);
    EXPECT_RC(p_cuMemAlloc_v2(&c, 512), CUDA_ERROR_OUT_OF_MEMORY);
    OK(p_cuMemFree_v2(b));
    OK(p_cuMemFree_v2(a));
    EXPECT(free_now() == f0);
}

static void pools(void)
{
    CUmemoryPool def, def2, mine;
    CUdeviceptr a, b;
    CUstream s;
    cuuint64_t v = 0;
    size_t f0 = free_now();
    OK(p_cuDeviceGetDefaultMemPool(&def, 0));
    OK(p_cuDeviceGetMemPool(&def2, 0));
    EXPECT(def == def2);
    EXPECT_RC(p_cuDeviceGetDefaultMemPool(&def, 3), CUDA_ERROR_INVALID_DEVICE);
    OK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* The pool reserves in 2 MiB granules; the device shows the reserve. */
    OK(p_cuMemAllocAsync(&a, 3 * MiB, s));
    EXPECT(free_now() == f0 - 4 * MiB);
    OK(p_cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    EXPECT(v == 4 * MiB);
    OK(p_cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    EXPECT(v == 3 * MiB);
    OK(p_cuMemFreeAsync(a, s));
    EXPECT(free_now() == f0 - 4 * MiB); /* still reserved until a sync point */
    OK(p_cuStreamSynchronize(s));
    EXPECT(free_now() == f0); /* release threshold 0: trimmed at the sync */
    /* With a release threshold the reserve stays; TrimTo gives it back. */
    v = 64 * MiB;
    OK(p_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    OK(p_cuMemAllocAsync(&a, 10 * MiB, s));
    OK(p_cuMemFreeAsync(a, s));
    OK(p_cuStreamSynchronize(s));
    EXPECT(free_now() == f0 - 10 * MiB);
    OK(p_cuMemPoolTrimTo(def, 0));
    EXPECT(free_now() == f0);
    v = 0;
    OK(p_cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    /* Explicit pools. */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    OK(p_cuMemPoolCreate(&mine, &props));
    OK(p_cuMemAllocFromPoolAsync(&b, 1 * MiB, mine, s));
    EXPECT(free_now() == f0 - 2 * MiB);
    EXPECT_RC(p_cuMemAllocFromPoolAsync(&b, 1 * MiB, NULL, s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemAllocAsync(&b, 0, s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemPoolDestroy(mine));
    EXPECT(free_now() == f0);
    EXPECT_RC(p_cuMemPoolDestroy(mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    props.location.id = 7;
    EXPECT_RC(p_cuMemPoolCreate(&mine, &props), CUDA_ERROR_INVALID_DEVICE);
    props.location.id = 0;
    props.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    EXPECT_RC(p_cuMemPoolCreate(&mine, &props), CUDA_ERROR_INVALID_VALUE);
    /* A pool that cannot grow says OUT_OF_MEMORY. */
    EXPECT_RC(p_cuMemAllocAsync(&a, f0 + 1, s), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(free_now() == f0);
    OK(p_cuStreamDestroy_v2(s));
}

static void vmm(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0, f0 = free_now();
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va;
    OK(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(gran == 2 * MiB);
    EXPECT_RC(p_cuMemGetAllocationGranularity(NULL, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemCreate(&h, 2 * MiB, &prop, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuMemCreate(&h, 2 * MiB, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 5;
    EXPECT_RC(p_cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop.location.id = 0;
    EXPECT_RC(p_cuMemCreate(&h, 2 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    OK(p_cuMemCreate(&h, 8 * MiB, &prop, 0));
    EXPECT(free_now() == f0 - 8 * MiB); /* physical memory is charged at creation */
    EXPECT_RC(p_cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
    EXPECT(va % (2 * MiB) == 0);
    EXPECT(free_now() == f0 - 8 * MiB); /* address space costs nothing */
    EXPECT_RC(p_cuMemMap(va, 16 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* bigger than h */
    EXPECT_RC(p_cuMemMap(va + 64 * MiB, 8 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemMap(va, 8 * MiB, 0, h, 0));
    EXPECT_RC(p_cuMemMap(va, 8 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
    CUmemAccessDesc desc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    OK(p_cuMemSetAccess(va, 8 * MiB, &desc, 1));
    EXPECT_RC(p_cuMemSetAccess(va, 16 * MiB, &desc, 1), CUDA_ERROR_INVALID_VALUE); /* unmapped */
    EXPECT_RC(p_cuMemSetAccess(va, 8 * MiB, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    /* Released while mapped: the memory stays until the unmap. */
    OK(p_cuMemRelease(h));
    EXPECT(free_now() == f0 - 8 * MiB);
    EXPECT_RC(p_cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemUnmap(va, 8 * MiB));
    EXPECT(free_now() == f0);
    EXPECT_RC(p_cuMemUnmap(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMemCreate(&h2, 2 * MiB, &prop, 0));
    OK(p_cuMemRelease(h2));
    EXPECT(free_now() == f0);
    OK(p_cuMemAddressFree(va, 16 * MiB));
    EXPECT_RC(p_cuMemAddressFree(va, 16 * MiB), CUDA_ERROR_INVALID_VALUE);
}

static void arrays(void)
{
    size_t f0 = free_now();
    CUarray arr, arr3;
    CUmipmappedArray mip;
    CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4};
    OK(p_cuArrayCreate_v2(&arr, &d2));
    EXPECT(free_now() == f0 - 16 * MiB);
    d2.NumChannels = 3;
    EXPECT_RC(p_cuArrayCreate_v2(&arr3, &d2), CUDA_ERROR_INVALID_VALUE);
    d2.NumChannels = 1;
    d2.Format = (CUarray_format)0x77;
    EXPECT_RC(p_cuArrayCreate_v2(&arr3, &d2), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuArrayCreate_v2(&arr3, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 256, .Height = 256, .Depth = 16,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 2};
    OK(p_cuArray3DCreate_v2(&arr3, &d3));
    EXPECT(free_now() == f0 - 16 * MiB - 2 * MiB);
    OK(p_cuArrayDestroy(arr));
    OK(p_cuArrayDestroy(arr3));
    EXPECT_RC(p_cuArrayDestroy(arr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(free_now() == f0);
    /* Mipmaps: levels 1024^2 + 512^2 + 256^2 floats. */
    CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 1};
    OK(p_cuMipmappedArrayCreate(&mip, &dm, 3));
    EXPECT(free_now() == f0 - (4 * MiB + 1 * MiB + 256 * 1024));
    EXPECT_RC(p_cuMipmappedArrayCreate(&mip, &dm, 0), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuMipmappedArrayDestroy(mip));
    EXPECT(free_now() == f0);
}

static void streams_events_launches(void)
{
    CUmodule mod;
    CUfunction f;
    CUstream s, sp;
    CUevent e0, e1, enotime;
    float ms = -1;
    EXPECT_RC(p_cuModuleLoadData(&mod, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuModuleLoadData(&mod, "image"));
    EXPECT_RC(p_cuModuleGetFunction(&f, mod, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuModuleGetFunction(&f, mod, "k"));
    OK(p_cuStreamCreate(&s, 0));
    OK(p_cuStreamCreateWithPriority(&sp, 0, -1));
    EXPECT_RC(p_cuStreamCreate(&s, 7), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuEventCreate(&e0, CU_EVENT_DEFAULT));
    OK(p_cuEventCreate(&e1, CU_EVENT_DEFAULT));
    OK(p_cuEventCreate(&enotime, CU_EVENT_DISABLE_TIMING));
    OK(p_cuEventQuery(e0)); /* never recorded: nothing to wait for */
    EXPECT_RC(p_cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE);

    /* 30 ms of kernels on s: the launches return at once, the stream is busy for 30 ms. */
    OK(p_cuEventRecord(e0, s));
    double t0 = now_ms();
    for (int i = 0; i < 3; i++)
        OK(p_cuLaunchKernel(f, 10000, 1, 1, 128, 1, 1, 0, s, NULL, NULL));
    OK(p_cuEventRecord(e1, s));
    EXPECT(now_ms() - t0 < 10);
    EXPECT_RC(p_cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    EXPECT_RC(p_cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    EXPECT_RC(p_cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
    OK(p_cuEventSynchronize(e1));
    EXPECT(now_ms() - t0 >= 29);
    OK(p_cuEventQuery(e1));
    OK(p_cuStreamQuery(s));
    OK(p_cuEventElapsedTime(&ms, e0, e1));
    EXPECT(ms > 29.9f && ms < 30.1f);
    OK(p_cuEventElapsedTime_v2(&ms, e0, e1));
    EXPECT(ms > 29.9f && ms < 30.1f);
    OK(p_cuEventRecord(enotime, s));
    EXPECT_RC(p_cuEventElapsedTime(&ms, e0, enotime), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(p_cuEventElapsedTime(NULL, e0, e1), CUDA_ERROR_INVALID_VALUE);

    /* Every launch flavour lands on the timeline: grid 2x5x1 = 10 us, ... */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    CUlaunchConfig cfg = {.gridDimX = 5000, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &attr,
                          .numAttrs = 1};
    OK(p_cuEventRecord(e0, s));
    OK(p_cuLaunchKernel_ptsz(f, 5000, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    OK(p_cuLaunchKernelEx(&cfg, f, NULL, NULL));
    OK(p_cuLaunchKernelEx_ptsz(&cfg, f, NULL, NULL));
    OK(p_cuLaunchCooperativeKernel(f, 50, 100, 1, 32, 1, 1, 0, s, NULL));
    OK(p_cuEventRecord(e1, s));
    OK(p_cuStreamSynchronize(s));
    OK(p_cuEventElapsedTime(&ms, e0, e1));
    EXPECT(ms > 19.9f && ms < 20.1f);

    /* Errors. */
    EXPECT_RC(p_cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(p_cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuLaunchKernel(f, 1, 1, 1, 64, 64, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    void *params[1] = {NULL}, *extra[1] = {NULL};
    EXPECT_RC(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, extra), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(p_cuLaunchKernelEx(NULL, f, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cfg.attrs = NULL;
    EXPECT_RC(p_cuLaunchKernelEx(&cfg, f, NULL, NULL), CUDA_ERROR_INVALID_VALUE);

    /* Default streams: NULL, legacy and per-thread all mean the context's own. */
    OK(p_cuLaunchKernel(f, 1000, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(p_cuLaunchKernel(f, 1000, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, NULL, NULL));
    OK(p_cuLaunchKernel(f, 1000, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL));
    OK(p_cuStreamSynchronize(NULL));
    OK(p_cuCtxSynchronize());

    /* Graphs: three 5 ms nodes run as 15 ms. */
    CUgraph g;
    CUgraphNode nodes[3];
    CUgraphExec x;
    CUDA_KERNEL_NODE_PARAMS_v2 np;
    memset(&np, 0, sizeof np);
    np.func = f;
    np.gridDimX = 5000;
    np.gridDimY = np.gridDimZ = np.blockDimX = np.blockDimY = np.blockDimZ = 1;
    OK(p_cuGraphCreate(&g, 0));
    for (int i = 0; i < 3; i++)
        OK(p_cuGraphAddKernelNode_v2(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &np));
    np.gridDimX = 0;
    EXPECT_RC(p_cuGraphAddKernelNode_v2(&nodes[0], g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuGraphInstantiateWithFlags(&x, g, 0));
    OK(p_cuEventRecord(e0, s));
    OK(p_cuGraphLaunch(x, s));
    OK(p_cuEventRecord(e1, s));
    OK(p_cuEventSynchronize(e1));
    OK(p_cuEventElapsedTime(&ms, e0, e1));
    EXPECT(ms > 14.9f && ms < 15.1f);
    EXPECT_RC(p_cuGraphLaunch(NULL, s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuGraphExecDestroy(x));
    EXPECT_RC(p_cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE);
    OK(p_cuGraphDestroy(g));

    /* Destroyed handles are reported, not used. */
    OK(p_cuEventDestroy_v2(e0));
    EXPECT_RC(p_cuEventRecord(e0, s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(p_cuEventDestroy_v2(e0), CUDA_ERROR_INVALID_HANDLE);
    OK(p_cuStreamDestroy_v2(sp));
    EXPECT_RC(p_cuStreamSynchronize(sp), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, sp, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(p_cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE);
    OK(p_cuModuleUnload(mod));
    EXPECT_RC(p_cuModuleGetFunction(&f, mod, "k"), CUDA_ERROR_INVALID_HANDLE);
}

static void bounded_queue(void)
{
    /* 1100 kernels of 1 ms: the launch call blocks once 1024 are queued. */
    CUmodule mod;
    CUfunction f;
    OK(p_cuModuleLoadData(&mod, "image"));
    OK(p_cuModuleGetFunction(&f, mod, "k"));
    double t0 = now_ms();
    for (int i = 0; i < 1100; i++)
        OK(p_cuLaunchKernel(f, 1000, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    double took = now_ms() - t0;
    EXPECT(took >= 70 && took < 200);
    OK(p_cuCtxSynchronize());
    EXPECT(now_ms() - t0 >= 1099);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    cuda_load();
    before_init();
    errors_and_proc_address();
    devices();
    contexts();
    memory();
    pools();
    vmm();
    arrays();
    streams_events_launches();
    bounded_queue();
    printf("checked %d, failed %d\n", checked, failed);
    return failed > 100 ? 100 : failed;
}
