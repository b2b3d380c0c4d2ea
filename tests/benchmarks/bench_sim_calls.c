/*
 * bench_sim_calls - cost per call of the simulated driver's hot paths (ns), reached through
 * dlopen + dlsym like the CUDA runtime.  Run by bench_sim.py with a fresh state file and
 * GPUWARDEN_SIM_KERNEL_SCALE=0 (launches take no simulated time, so only the call is timed).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"
#include "nvml_api.h"

#define GW_CUDA_FN(name, params) static CUresult (*p_##name) params;
#include "cuda_api_functions.h"
#undef GW_CUDA_FN
#define GW_NVML_FN(name, params) static nvmlReturn_t (*n_##name) params;
#include "nvml_api_functions.h"
#undef GW_NVML_FN

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define MUST(x)                                                                               \
    do {                                                                                      \
        if ((x) != 0) {                                                                       \
            fprintf(stderr, "%s failed\n", #x);                                               \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    void *cu = dlopen("libcuda.so.1", RTLD_NOW), *ml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!cu || !ml) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
#define GW_CUDA_FN(name, params) *(void **)&p_##name = dlsym(cu, #name);
#include "cuda_api_functions.h"
#undef GW_CUDA_FN
#define GW_NVML_FN(name, params) *(void **)&n_##name = dlsym(ml, #name);
#include "nvml_api_functions.h"
#undef GW_NVML_FN
    CUcontext ctx;
    CUmodule mod;
    CUfunction f;
    CUdeviceptr p;
    MUST(p_cuInit(0));
    MUST(p_cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(p_cuCtxSetCurrent(ctx));
    MUST(p_cuModuleLoadData(&mod, "x"));
    MUST(p_cuModuleGetFunction(&f, mod, "k"));

    double t = now_ns();
    for (int i = 0; i < n; i++) {
        MUST(p_cuMemAlloc_v2(&p, 1 << 20));
        MUST(p_cuMemFree_v2(p));
    }
    printf("cuMemAlloc_v2+cuMemFree_v2 %.0f ns/pair\n", (now_ns() - t) / n);

    t = now_ns();
    for (int i = 0; i < n; i++)
        MUST(p_cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    printf("cuLaunchKernel %.0f ns/launch\n", (now_ns() - t) / n);
    MUST(p_cuCtxSynchronize());

    t = now_ns();
    for (int i = 0; i < n; i++)
        MUST(p_cuMemAllocAsync(&p, 4096, NULL) || p_cuMemFreeAsync(p, NULL));
    printf("cuMemAllocAsync+cuMemFreeAsync %.0f ns/pair\n", (now_ns() - t) / n);

    nvmlDevice_t dev;
    nvmlProcessInfo_t procs[64];
    unsigned count;
    MUST(n_nvmlInit_v2());
    MUST(n_nvmlDeviceGetHandleByIndex_v2(0, &dev));
    int m = n / 100;
    t = now_ns();
    for (int i = 0; i < m; i++) {
        count = 64;
        MUST(n_nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, procs));
    }
    printf("nvmlDeviceGetComputeRunningProcesses_v3 %.0f ns/call (%u processes)\n",
           (now_ns() - t) / m, count);
    nvmlUtilization_t u;
    t = now_ns();
    for (int i = 0; i < m; i++)
        MUST(n_nvmlDeviceGetUtilizationRates(dev, &u));
    printf("nvmlDeviceGetUtilizationRates %.0f ns/call (after %d launches)\n", (now_ns() - t) / m,
           n);
    return 0;
}
