/*
 * smoke_workload - the workload of `gpuwarden sim smoke`: reaches the (simulated) driver like
 * the CUDA runtime does (dlopen + dlsym), allocates through three paths, keeps the device
 * busy about half the time for DUTY_MS, prints what it did, then says "ready" and holds its
 * memory until a line (or EOF) arrives on stdin.
 * Usage: smoke_workload DUTY_MS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

#define MiB (1024ULL * 1024ULL)

#define GW_CUDA_FN(name, params) static CUresult (*p_##name) params;
#include "cuda_api_functions.h"
#undef GW_CUDA_FN

static void check(CUresult rc, const char *what)
{
    if (rc != CUDA_SUCCESS) {
        const char *name = "?";
        if (p_cuGetErrorName)
            p_cuGetErrorName(rc, &name);
        fprintf(stderr, "smoke_workload: %s failed: %s (%d)\n", what, name, (int)rc);
        exit(1);
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    double duty_ms = argc > 1 ? atof(argv[1]) : 1500;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "smoke_workload: dlopen(libcuda.so.1): %s\n", dlerror());
        return 1;
    }
#define GW_CUDA_FN(name, params) *(void **)&p_##name = dlsym(h, #name);
#include "cuda_api_functions.h"
#undef GW_CUDA_FN

    CUcontext ctx;
    CUdeviceptr a, b;
    CUmemGenericAllocationHandle vmm;
    CUmodule mod;
    CUfunction fn;
    char name[96];
    check(p_cuInit(0), "cuInit");
    check(p_cuDeviceGetName(name, sizeof name, 0), "cuDeviceGetName");
    check(p_cuDevicePrimaryCtxRetain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(p_cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    printf("workload pid %d on device 0 (%s)\n", (int)getpid(), name);
    check(p_cuMemAlloc_v2(&a, 1024 * MiB), "cuMemAlloc_v2");
    printf("  cuMemAlloc_v2       1024 MiB\n");
    check(p_cuMemAllocAsync(&b, 256 * MiB, NULL), "cuMemAllocAsync");
    printf("  cuMemAllocAsync      256 MiB (from the default pool)\n");
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    check(p_cuMemCreate(&vmm, 512 * MiB, &prop, 0), "cuMemCreate");
    printf("  cuMemCreate          512 MiB (VMM, as PyTorch's expandable segments do)\n");
    check(p_cuModuleLoadData(&mod, "simulated"), "cuModuleLoadData");
    check(p_cuModuleGetFunction(&fn, mod, "busy"), "cuModuleGetFunction");
    /* 10 ms kernels (grid 10000 = 10000 us) with 10 ms pauses: about 50% busy. */
    double end = now_ms() + duty_ms;
    unsigned kernels = 0;
    while (now_ms() < end) {
        check(p_cuLaunchKernel(fn, 10000, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
        check(p_cuCtxSynchronize(), "cuCtxSynchronize");
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        kernels++;
    }
    printf("  cuLaunchKernel       %u kernels of 10 ms, each followed by 10 ms idle\n", kernels);
    printf("ready\n");
    char line[16];
    if (fgets(line, sizeof line, stdin) == NULL) {
        /* EOF: exit and let the driver reclaim */
    }
    return 0;
}
