/* bench_compute_launch: CPU cost of one cuLaunchKernel of an empty kernel, for the compute
 * limiter's "no limit" overhead (run by bench_compute.py with and without libvgpu preloaded,
 * alternately).  Reaches the driver like the CUDA runtime: dlopen("libcuda.so.1") + dlsym.
 *
 *   bench_compute_launch ROUNDS PER_ROUND [SPIN_NS]
 *   prints: ns_per_launch=<median over rounds> min_ns_per_launch=<best round>
 *   SPIN_NS: the CPU spins this long between launches (a launch-bound application's own work,
 *   which leaves the GPU mostly idle); it is not counted in ns_per_launch.
 *
 * The kernel is PTX JIT-compiled by the driver (no nvcc needed).  On the simulated driver the
 * module image is ignored and the kernel is a 1-us simulated one.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

static const char ptx[] = ".version 8.0\n"
                          ".target sm_90\n"
                          ".address_size 64\n"
                          ".visible .entry noop()\n"
                          "{\n"
                          "    ret;\n"
                          "}\n";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define NEED(var, name)                                                                         \
    do {                                                                                        \
        *(void **)&var = dlsym(h, name);                                                        \
        if (var == NULL) {                                                                      \
            fprintf(stderr, "bench_compute_launch: no %s\n", name);                             \
            return 3;                                                                           \
        }                                                                                       \
    } while (0)

int main(int argc, char **argv)
{
    __typeof__(cuInit) *init;
    __typeof__(cuDeviceGet) *device_get;
    __typeof__(cuDevicePrimaryCtxRetain) *retain;
    __typeof__(cuCtxSetCurrent) *set_current;
    __typeof__(cuCtxSynchronize) *sync;
    __typeof__(cuModuleLoadData) *load;
    __typeof__(cuModuleGetFunction) *get_function;
    __typeof__(cuLaunchKernel) *launch;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    int per = argc > 2 ? atoi(argv[2]) : 500;
    uint64_t spin = argc > 3 ? (uint64_t)atoll(argv[3]) : 0;
    double *ns;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);

    if (h == NULL || rounds < 1 || per < 1) {
        fprintf(stderr, "bench_compute_launch: %s\n", h ? "bad arguments" : dlerror());
        return 2;
    }
    NEED(init, "cuInit");
    NEED(device_get, "cuDeviceGet");
    NEED(retain, "cuDevicePrimaryCtxRetain");
    NEED(set_current, "cuCtxSetCurrent");
    NEED(sync, "cuCtxSynchronize");
    NEED(load, "cuModuleLoadData");
    NEED(get_function, "cuModuleGetFunction");
    NEED(launch, "cuLaunchKernel");
    if (init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_current(ctx) ||
        load(&mod, ptx) || get_function(&fn, mod, "noop")) {
        fprintf(stderr, "bench_compute_launch: CUDA setup failed\n");
        return 4;
    }
    ns = calloc((size_t)rounds, sizeof *ns);
    if (ns == NULL)
        return 5;
    for (int w = 0; w < per; w++) /* warm up */
        launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    sync();
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = now_ns(), spun = 0;
        for (int i = 0; i < per; i++) {
            if (launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
                return 6;
            if (spin != 0) {
                uint64_t s0 = now_ns(), s1;
                while ((s1 = now_ns()) < s0 + spin)
                    ;
                spun += s1 - s0;
            }
        }
        ns[r] = (double)(now_ns() - t0 - spun) / per;
        sync();
    }
    qsort(ns, (size_t)rounds, sizeof *ns, cmp);
    printf("ns_per_launch=%.1f min_ns_per_launch=%.1f\n", ns[rounds / 2], ns[0]);
    return 0;
}
