/* bench_driver_calls: CPU cost of the driver calls libvgpu's compute gate may make per launch
 * (what a gate that calls them on every launch adds to a launch-bound application).
 *
 *   bench_driver_calls [N]      prints one "name ns_per_call" line per call (median of 9 runs)
 *
 * Reaches the driver like the CUDA runtime: dlopen("libcuda.so.1") + dlsym.  On the simulated
 * driver the numbers are the simulator's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry noop()\n{\n    ret;\n}\n";

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
            fprintf(stderr, "bench_driver_calls: no %s\n", name);                               \
            return 3;                                                                           \
        }                                                                                       \
    } while (0)

#define TIME(label, stmt)                                                                       \
    do {                                                                                        \
        double r[9];                                                                            \
        for (int k = 0; k < 9; k++) {                                                           \
            uint64_t t0 = now_ns();                                                             \
            for (int i = 0; i < n; i++) {                                                       \
                stmt;                                                                           \
            }                                                                                   \
            r[k] = (double)(now_ns() - t0) / n;                                                 \
            sync();                                                                             \
        }                                                                                       \
        qsort(r, 9, sizeof r[0], cmp);                                                          \
        printf("%s %.1f\n", label, r[4]);                                                       \
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
    __typeof__(cuEventCreate) *ev_create;
    __typeof__(cuEventRecord) *ev_record;
    __typeof__(cuEventQuery) *ev_query;
    __typeof__(cuStreamQuery) *st_query;
    __typeof__(cuCtxGetDevice) *get_device;
    __typeof__(cuCtxGetCurrent) *get_current;
    CUresult (*is_capturing)(CUstream, int *);
    CUresult (*exchange)(CUstreamCaptureMode *);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUevent ev[2];
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);

    if (h == NULL || n < 1) {
        fprintf(stderr, "bench_driver_calls: %s\n", h ? "bad arguments" : dlerror());
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
    NEED(ev_create, "cuEventCreate");
    NEED(ev_record, "cuEventRecord");
    NEED(ev_query, "cuEventQuery");
    NEED(st_query, "cuStreamQuery");
    NEED(get_device, "cuCtxGetDevice");
    NEED(get_current, "cuCtxGetCurrent");
    *(void **)&is_capturing = dlsym(h, "cuStreamIsCapturing"); /* the simulator has neither */
    *(void **)&exchange = dlsym(h, "cuThreadExchangeStreamCaptureMode");
    if (init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_current(ctx) ||
        load(&mod, ptx) || get_function(&fn, mod, "noop") || ev_create(&ev[0], 0) ||
        ev_create(&ev[1], 0)) {
        fprintf(stderr, "bench_driver_calls: CUDA setup failed\n");
        return 4;
    }
    TIME("cuLaunchKernel", launch(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    TIME("cuEventRecord", ev_record(ev[i & 1], NULL));
    TIME("cuEventQuery", ev_query(ev[0]));
    TIME("cuStreamQuery", st_query(NULL));
    if (is_capturing != NULL) {
        int st;
        TIME("cuStreamIsCapturing", is_capturing(NULL, &st));
    }
    if (exchange != NULL) {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        TIME("cuThreadExchangeStreamCaptureMode", exchange(&m));
    }
    {
        CUdevice d;
        TIME("cuCtxGetDevice", get_device(&d));
    }
    {
        CUcontext c;
        TIME("cuCtxGetCurrent", get_current(&c));
    }
    return 0;
}
