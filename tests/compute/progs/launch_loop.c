/* launch_loop: a GPU workload for the compute-limiter tests, run on the simulated driver with
 * libvgpu preloaded.  It reaches the driver the way the CUDA runtime does, dlopen("libcuda.so.1")
 * + dlsym, so it gets libvgpu's hooks.
 *
 *   launch_loop PATH GRID SECONDS [NODES]
 *     PATH   kernel | ptsz | ex | ex_ptsz | coop | coop_ptsz | graph | graph_ptsz
 *     GRID   grid size: a simulated kernel runs GRID microseconds (x GPUWARDEN_SIM_KERNEL_SCALE)
 *     NODES  kernels per graph (graph paths; default 10)
 *   Launches back to back for SECONDS, synchronising every 64 launches like a real application's
 *   occasional sync, then prints one line of key=value pairs:
 *     share       GPU time of its kernels / wall time, from 1 s after start to the end
 *     first_share GPU time of the kernels launched in the first second / the wall time from
 *                 the first launch to the end of the synchronisation at 1 s (a cold start)
 *     rate        launches per second over the same time
 *     launches    launches made
 *   LAUNCH_LOOP_SYNC=N synchronises every N launches instead (0: only at 1 s and at the end);
 *   LAUNCH_LOOP_GAP_US=U spins U microseconds of CPU after each launch (an application's own
 *   work between launches, which leaves the GPU idle part of the time).
 *   LAUNCH_LOOP_SHAPES=S (kernel path) gives launch n the block shape and shared memory of
 *   n % S (S up to 1048576; the simulated kernel's time does not depend on it, its signature does), as a
 *   workload of changing shapes (sequence lengths) launches kernels of unknown cost.
 *   LAUNCH_LOOP_KERNELS=K (kernel path) launches K different functions in turn, as a model's
 *   forward pass does (with GPUWARDEN_SIM_LAZY_LOAD_US, each one's first launch loads it).
 *   LAUNCH_LOOP_DELAY_US=U launches one kernel, synchronises, and idles U microseconds before
 *   its loop starts (a container that loaded its model and waits for work); the loop's times
 *   count from its end.  LAUNCH_LOOP_DELAY_GRID=G gives that one kernel grid G instead (a
 *   model's loading ran other kernels than its loop's: the loop's first is of unknown cost).
 *   LAUNCH_LOOP_IDLE_US=U sleeps U microseconds after each synchronisation (an application
 *   idle between bursts of work, waiting for its next request).
 *   LAUNCH_LOOP_REQUEST=K,C makes a request of K synchronisations: after each of the first K-1
 *   it spins C microseconds of CPU (the application's own work between the steps of one
 *   request, before its next launch), and it sleeps LAUNCH_LOOP_IDLE_US only after the Kth.
 *   LAUNCH_LOOP_BURST_US=U leaves the idle out for the loop's first U microseconds: a service
 *   that meets a burst of requests, back to back, then settles into its usual pace.
 *   LAUNCH_LOOP_CPU=1 adds call_ns: the mean CPU time of this thread inside a launch call (what
 *   the launch costs the application's thread, libvgpu's gate included; robust to preemption).
 *     first_ns, last_ns   CLOCK_MONOTONIC of the first and last launch's return
 *   With LAUNCH_LOOP_TIMES=path it also writes the CLOCK_MONOTONIC of every launch's return,
 *   one per line.
 *   LAUNCH_LOOP_LATENCY=1 (with LAUNCH_LOOP_SYNC=1: the stream is idle before each launch) adds
 *   start_p50_us, start_p99_us, start_max_us, starts: how long after its launch call each
 *   kernel started, on the GPU's clock, from 1 s after start on.  An event recorded on the idle
 *   stream just before the call fires at the call; one recorded after it fires at the kernel's
 *   end; their distance less the kernel's own time is the wait (on the simulated GPU, work of
 *   other processes queued ahead of it, and the launch call itself, libvgpu's gate included).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_api.h"

#define FN(name) static __typeof__(name) *p_##name
FN(cuInit);
FN(cuDeviceGet);
FN(cuDevicePrimaryCtxRetain);
FN(cuCtxSetCurrent);
FN(cuCtxSynchronize);
FN(cuModuleLoadData);
FN(cuModuleGetFunction);
FN(cuEventCreate);
FN(cuEventRecord);
FN(cuEventElapsedTime);
FN(cuLaunchKernel);
FN(cuLaunchKernel_ptsz);
FN(cuLaunchKernelEx);
FN(cuLaunchKernelEx_ptsz);
FN(cuLaunchCooperativeKernel);
FN(cuLaunchCooperativeKernel_ptsz);
FN(cuGraphCreate);
FN(cuGraphAddKernelNode_v2);
FN(cuGraphInstantiateWithFlags);
FN(cuGraphLaunch);
FN(cuGraphLaunch_ptsz);

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps `ns` (CLOCK_MONOTONIC, to an absolute end: signals do not lengthen it). */
static void sleep_ns(uint64_t ns)
{
    uint64_t until = now_ns() + ns;
    struct timespec ts = {(time_t)(until / 1000000000ull), (long)(until % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The whole number in environment variable `name` (0 when unset) into *v: 1 when it is set, 0
 * when not, or -1 after saying what is wrong (valid: `lo` to `hi`; `what` says what it is). */
static int env_num(const char *name, const char *what, unsigned long long lo,
                   unsigned long long hi, unsigned long long *v)
{
    const char *s = getenv(name);
    char *end = NULL;

    *v = 0;
    if (s == NULL)
        return 0;
    *v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end != '\0' || *v < lo || *v > hi) {
        fprintf(stderr, "launch_loop: %s=%s: give %s, %llu to %llu\n", name, s, what, lo, hi);
        return -1;
    }
    return 1;
}

/* The microseconds in environment variable `name`, as env_num (valid: 0 to 3600000000). */
static int env_us(const char *name, const char *what, unsigned long long *us)
{
    char said[160];

    snprintf(said, sizeof said, "the microseconds %s", what);
    return env_num(name, said, 0, 3600000000ull, us);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *need(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "launch_loop: libcuda.so.1 has no %s\n", name);
        exit(3);
    }
    return p;
}

static void check(CUresult rc, const char *what)
{
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "launch_loop: %s failed: %d\n", what, (int)rc);
        exit(4);
    }
}

#define LOAD(name) *(void **)&p_##name = need(h, #name)

int main(int argc, char **argv)
{
    void *h;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn, fns[64];
    const char *kernels_s = getenv("LAUNCH_LOOP_KERNELS");
    unsigned nfn = kernels_s ? (unsigned)strtoul(kernels_s, NULL, 10) : 1;
    const char *shapes_s = getenv("LAUNCH_LOOP_SHAPES");
    unsigned long nshapes = shapes_s ? strtoul(shapes_s, NULL, 10) : 1;
    CUgraphExec exec = NULL;
    const char *path;
    unsigned grid, nodes = 10, i;
    double seconds;
    uint64_t t0, t1 = 0, end, first = 0, last = 0, n = 0, n1 = 0, per_launch_us;
    uint64_t *times = NULL;
    size_t ntimes = 0, cap = 0;
    const char *times_path = getenv("LAUNCH_LOOP_TIMES");
    const char *sync_s = getenv("LAUNCH_LOOP_SYNC");
    uint64_t sync_every = sync_s ? strtoull(sync_s, NULL, 10) : 64;
    unsigned long long gap_us, idle_us;
    if (env_us("LAUNCH_LOOP_GAP_US", "of CPU to spin after each launch", &gap_us) < 0 ||
        env_us("LAUNCH_LOOP_IDLE_US", "to sleep after each synchronisation", &idle_us) < 0)
        return 2;
    uint64_t gap_ns = 1000u * gap_us, idle_ns = 1000u * idle_us;
    /* a burst: the first BURST_US of the loop run without the idle (requests back to back) */
    unsigned long long burst_us;
    if (env_us("LAUNCH_LOOP_BURST_US", "of requests back to back at the loop's start",
               &burst_us) < 0)
        return 2;
    const char *request_s = getenv("LAUNCH_LOOP_REQUEST");
    unsigned long long request_k = 1, step_us = 0, syncs = 0;
    if (request_s != NULL && (sscanf(request_s, "%llu,%llu", &request_k, &step_us) != 2 ||
                              request_k == 0)) {
        fprintf(stderr, "launch_loop: LAUNCH_LOOP_REQUEST=%s: give K,C (K >= 1 synchronisations "
                "a request, C microseconds of CPU between them)\n", request_s);
        return 2;
    }
    unsigned long long delay_us;
    int delay = env_us("LAUNCH_LOOP_DELAY_US", "to idle before the loop", &delay_us);
    unsigned long long load_grid;
    if (delay < 0 || env_num("LAUNCH_LOOP_DELAY_GRID", "the loading kernel's grid", 1,
                             0xffffffffull, &load_grid) < 0)
        return 2;
    int want_cpu = getenv("LAUNCH_LOOP_CPU") != NULL;
    int want_latency = getenv("LAUNCH_LOOP_LATENCY") != NULL;
    CUevent ev0 = NULL, ev1 = NULL;
    double *waits = NULL;
    size_t nwaits = 0, wcap = 0;
    uint64_t cpu_in_calls = 0, cpu_calls = 0, c0 = 0;
    const char *scale_s = getenv("GPUWARDEN_SIM_KERNEL_SCALE");
    double kernel_scale = scale_s ? strtod(scale_s, NULL) : 1.0;

    if (argc < 4) {
        fprintf(stderr, "usage: launch_loop PATH GRID SECONDS [NODES]\n");
        return 2;
    }
    path = argv[1];
    grid = (unsigned)strtoul(argv[2], NULL, 10);
    seconds = strtod(argv[3], NULL);
    if (argc > 4)
        nodes = (unsigned)strtoul(argv[4], NULL, 10);

    h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "launch_loop: %s\n", dlerror());
        return 3;
    }
    LOAD(cuInit);
    LOAD(cuDeviceGet);
    LOAD(cuDevicePrimaryCtxRetain);
    LOAD(cuCtxSetCurrent);
    LOAD(cuCtxSynchronize);
    LOAD(cuModuleLoadData);
    LOAD(cuModuleGetFunction);
    check(p_cuInit(0), "cuInit");
    check(p_cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(p_cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(p_cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(p_cuModuleLoadData(&mod, "launch_loop"), "cuModuleLoadData");
    check(p_cuModuleGetFunction(&fn, mod, "busy"), "cuModuleGetFunction");
    if (nshapes < 1 || nshapes > 1048576ul) {
        fprintf(stderr, "launch_loop: LAUNCH_LOOP_SHAPES must be 1 to 1048576, got %lu\n",
                nshapes);
        return 2;
    }
    if (nfn < 1 || nfn > 64) {
        fprintf(stderr, "launch_loop: LAUNCH_LOOP_KERNELS must be 1 to 64, got %u\n", nfn);
        return 2;
    }
    fns[0] = fn;
    for (i = 1; i < nfn; i++) {
        char name[16];
        snprintf(name, sizeof name, "busy%u", i);
        check(p_cuModuleGetFunction(&fns[i], mod, name), "cuModuleGetFunction");
    }
    if (want_latency) {
        if (sync_every != 1) {
            fprintf(stderr, "launch_loop: LAUNCH_LOOP_LATENCY needs LAUNCH_LOOP_SYNC=1 (an idle "
                    "stream before each launch), got %llu\n", (unsigned long long)sync_every);
            return 2;
        }
        LOAD(cuEventCreate);
        LOAD(cuEventRecord);
        LOAD(cuEventElapsedTime);
        check(p_cuEventCreate(&ev0, 0), "cuEventCreate");
        check(p_cuEventCreate(&ev1, 0), "cuEventCreate");
    }

    per_launch_us = grid;
    if (strncmp(path, "graph", 5) == 0) {
        CUgraph graph;
        CUDA_KERNEL_NODE_PARAMS_v2 kp;
        CUgraphNode node, prev;
        LOAD(cuGraphCreate);
        LOAD(cuGraphAddKernelNode_v2);
        LOAD(cuGraphInstantiateWithFlags);
        check(p_cuGraphCreate(&graph, 0), "cuGraphCreate");
        memset(&kp, 0, sizeof kp);
        kp.func = fn;
        kp.gridDimX = grid;
        kp.gridDimY = kp.gridDimZ = kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
        for (i = 0; i < nodes; i++) {
            check(p_cuGraphAddKernelNode_v2(&node, graph, i ? &prev : NULL, i ? 1 : 0, &kp),
                  "cuGraphAddKernelNode_v2");
            prev = node;
        }
        check(p_cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
        per_launch_us = (uint64_t)grid * nodes;
        if (strcmp(path, "graph") == 0)
            LOAD(cuGraphLaunch);
        else
            LOAD(cuGraphLaunch_ptsz);
    } else if (strcmp(path, "kernel") == 0) {
        LOAD(cuLaunchKernel);
    } else if (strcmp(path, "ptsz") == 0) {
        LOAD(cuLaunchKernel_ptsz);
    } else if (strcmp(path, "ex") == 0) {
        LOAD(cuLaunchKernelEx);
    } else if (strcmp(path, "ex_ptsz") == 0) {
        LOAD(cuLaunchKernelEx_ptsz);
    } else if (strcmp(path, "coop") == 0) {
        LOAD(cuLaunchCooperativeKernel);
    } else if (strcmp(path, "coop_ptsz") == 0) {
        LOAD(cuLaunchCooperativeKernel_ptsz);
    } else {
        fprintf(stderr, "launch_loop: unknown launch path '%s'\n", path);
        return 2;
    }

    if (delay) {
        /* one kernel launched and synchronised (a model loaded), then the process idles before
         * its loop (a container that started and waits for work, present on the GPU) */
        LOAD(cuLaunchKernel);
        check(p_cuLaunchKernel(fn, load_grid ? (unsigned)load_grid : grid, 1, 1, 1, 1, 1, 0, NULL,
                               NULL, NULL),
              "first kernel");
        check(p_cuCtxSynchronize(), "cuCtxSynchronize");
        sleep_ns(1000ull * delay_us);
    }
    t0 = now_ns();
    end = t0 + (uint64_t)(seconds * 1e9);
    for (;;) {
        CUresult rc;
        CUlaunchConfig cfg;
        uint64_t t = now_ns();
        if (t >= end)
            break;
        if (t1 == 0 && t >= t0 + 1000000000ull) {
            check(p_cuCtxSynchronize(), "cuCtxSynchronize");
            t1 = now_ns();
            n1 = n;
        }
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = grid;
        cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        if (want_cpu)
            c0 = cpu_ns();
        if (want_latency)
            check(p_cuEventRecord(ev0, NULL), "cuEventRecord");
        if (strcmp(path, "kernel") == 0)
            rc = p_cuLaunchKernel(fns[n % nfn], grid, 1, 1, 1 + (unsigned)(n % nshapes % 32u),
                                  1 + (unsigned)(n % nshapes / 32u % 32u), 1,
                                  16u * (unsigned)(n % nshapes / 1024u), NULL, NULL, NULL);
        else if (strcmp(path, "ptsz") == 0)
            rc = p_cuLaunchKernel_ptsz(fn, grid, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        else if (strcmp(path, "ex") == 0)
            rc = p_cuLaunchKernelEx(&cfg, fn, NULL, NULL);
        else if (strcmp(path, "ex_ptsz") == 0)
            rc = p_cuLaunchKernelEx_ptsz(&cfg, fn, NULL, NULL);
        else if (strcmp(path, "coop") == 0)
            rc = p_cuLaunchCooperativeKernel(fn, grid, 1, 1, 1, 1, 1, 0, NULL, NULL);
        else if (strcmp(path, "coop_ptsz") == 0)
            rc = p_cuLaunchCooperativeKernel_ptsz(fn, grid, 1, 1, 1, 1, 1, 0, NULL, NULL);
        else if (strcmp(path, "graph") == 0)
            rc = p_cuGraphLaunch(exec, NULL);
        else
            rc = p_cuGraphLaunch_ptsz(exec, NULL);
        check(rc, path);
        if (want_latency) /* at once: the kernel is still queued or running, the tail is its end */
            check(p_cuEventRecord(ev1, NULL), "cuEventRecord");
        if (want_cpu && t1 != 0) {
            cpu_in_calls += cpu_ns() - c0;
            cpu_calls++;
        }
        last = now_ns();
        if (first == 0)
            first = last;
        n++;
        if (times_path != NULL) {
            if (ntimes == cap) {
                cap = cap ? 2 * cap : 4096;
                times = realloc(times, cap * sizeof *times);
                if (times == NULL)
                    return 5;
            }
            times[ntimes++] = last;
        }
        if (gap_ns != 0)
            while (now_ns() < last + gap_ns)
                ;
        if (sync_every != 0 && n % sync_every == 0) {
            check(p_cuCtxSynchronize(), "cuCtxSynchronize");
            if (++syncs % request_k != 0) { /* a step of a request: the CPU's part, then on */
                uint64_t until = now_ns() + 1000u * step_us;
                while (now_ns() < until)
                    ;
            } else if (idle_ns != 0 && now_ns() >= t0 + 1000u * burst_us) {
                sleep_ns(idle_ns);
            }
        }
        if (want_latency && t1 != 0) {
            float ms = 0.0f;
            check(p_cuEventElapsedTime(&ms, ev0, ev1), "cuEventElapsedTime");
            if (nwaits == wcap) {
                wcap = wcap ? 2 * wcap : 1024;
                waits = realloc(waits, wcap * sizeof *waits);
                if (waits == NULL)
                    return 5;
            }
            waits[nwaits++] = (double)ms * 1e3 - (double)per_launch_us * kernel_scale;
        }
    }
    check(p_cuCtxSynchronize(), "cuCtxSynchronize");
    end = now_ns();
    if (times_path != NULL) {
        FILE *f = fopen(times_path, "w");
        if (f == NULL)
            return 6;
        for (size_t k = 0; k < ntimes; k++)
            fprintf(f, "%llu\n", (unsigned long long)times[k]);
        fclose(f);
    }
    {
        double scale = kernel_scale;
        double busy = (double)(n - n1) * (double)per_launch_us * 1e3 * scale;
        double share = t1 ? busy / (double)(end - t1) : 0.0;
        double rate = t1 ? (double)(n - n1) * 1e9 / (double)(end - t1) : 0.0;
        double first_share = t1 && first ? (double)n1 * (double)per_launch_us * 1e3 * scale /
                                           (double)(t1 - t0) : 0.0;
        if (cpu_calls != 0)
            printf("call_ns=%.1f ", (double)cpu_in_calls / (double)cpu_calls);
        if (nwaits != 0) {
            qsort(waits, nwaits, sizeof *waits, by_value);
            printf("start_p50_us=%.1f start_p99_us=%.1f start_max_us=%.1f starts=%zu ",
                   waits[nwaits / 2], waits[(nwaits * 99) / 100], waits[nwaits - 1], nwaits);
        }
        printf("first_share=%.4f ", first_share);
        printf("share=%.4f rate=%.1f launches=%llu first_ns=%llu last_ns=%llu\n", share, rate,
               (unsigned long long)n, (unsigned long long)first, (unsigned long long)last);
    }
    return 0;
}
