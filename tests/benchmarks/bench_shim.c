/* bench_shim.c: the cost of the driver calls libvgpu sits on, measured the way a CUDA runtime
 * reaches them (dlopen("libcuda.so.1") + dlsym).  Run it with and without LD_PRELOAD=libvgpu.so
 * (bench_shim.py does, interleaved) and compare.  Prints one JSON line:
 *   launch_ns      per cuLaunchKernel of an empty 1x1 kernel (time of the launch calls only;
 *                  the stream is drained every 256 launches, outside the timed part)
 *   alloc_free_ns  per cuMemAlloc_v2(1 MiB) + cuMemFree_v2 pair
 * The kernel is an embedded PTX "noop" (JIT-compiled by a real driver; the simulator accepts any
 * image).  Usage: bench_shim [launches] [pairs] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

static const char noop_ptx[] = ".version 7.0\n"
                               ".target sm_50\n"
                               ".address_size 64\n"
                               ".visible .entry noop()\n"
                               "{\n"
                               "  ret;\n"
                               "}\n";

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define NEED(lib, var, name)                                                                    \
    __typeof__(&name) var = (__typeof__(&name))dlsym(lib, #name);                               \
    if (var == NULL) {                                                                          \
        fprintf(stderr, "bench_shim: libcuda lacks %s\n", #name);                               \
        return 2;                                                                               \
    }

#define CHECK(call)                                                                             \
    do {                                                                                        \
        CUresult rc_ = (call);                                                                  \
        if (rc_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "bench_shim: %s failed: %d\n", #call, (int)rc_);                    \
            return 3;                                                                           \
        }                                                                                       \
    } while (0)

int main(int argc, char **argv)
{
    long launches = argc > 1 ? atol(argv[1]) : 100000;
    long pairs = argc > 2 ? atol(argv[2]) : 20000;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "bench_shim: %s\n", dlerror());
        return 2;
    }
    NEED(lib, init, cuInit);
    NEED(lib, device_get, cuDeviceGet);
    NEED(lib, retain, cuDevicePrimaryCtxRetain);
    NEED(lib, set_current, cuCtxSetCurrent);
    NEED(lib, sync, cuCtxSynchronize);
    NEED(lib, load, cuModuleLoadData);
    NEED(lib, get_function, cuModuleGetFunction);
    NEED(lib, launch, cuLaunchKernel);
    NEED(lib, mem_alloc, cuMemAlloc_v2);
    NEED(lib, mem_free, cuMemFree_v2);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CHECK(init(0));
    CHECK(device_get(&dev, 0));
    CHECK(retain(&ctx, dev));
    CHECK(set_current(ctx));
    CHECK(load(&mod, noop_ptx));
    CHECK(get_function(&fn, mod, "noop"));

    /* warm up both paths */
    for (int i = 0; i < 1000; i++)
        CHECK(launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(sync());
    for (int i = 0; i < 100; i++) {
        CUdeviceptr p;
        CHECK(mem_alloc(&p, 1 << 20));
        CHECK(mem_free(p));
    }

    double launch_time = 0;
    for (long done = 0; done < launches;) {
        long batch = launches - done < 256 ? launches - done : 256;
        double t0 = now_ns();
        for (long i = 0; i < batch; i++)
            CHECK(launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
        launch_time += now_ns() - t0;
        CHECK(sync());
        done += batch;
    }

    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p;
        CHECK(mem_alloc(&p, 1 << 20));
        CHECK(mem_free(p));
    }
    double pair_time = now_ns() - t0;
    printf("{\"launch_ns\": %.1f, \"alloc_free_ns\": %.1f, \"launches\": %ld, \"pairs\": %ld}\n",
           launch_time / (double)launches, pair_time / (double)pairs, launches, pairs);
    return 0;
}
