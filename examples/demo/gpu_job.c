/* gpu_job: a tiny GPU workload for the gpuwarden demo and tests.
 *
 *   gpu_job [--bypass] ALLOC_MIB HOLD_MS [CHUNK_MIB]
 *   gpu_job [--bypass] --churn MIB RATE SECONDS
 *
 * Reaches the driver like the CUDA runtime does (dlopen("libcuda.so.1") + dlsym), creates a
 * context on device 0, allocates ALLOC_MIB in chunks of CHUNK_MIB (default: one chunk), holds
 * it HOLD_MS milliseconds, frees it and exits 0.  Out of memory: prints it and exits 3.
 * --bypass: re-executes itself without LD_PRELOAD first, so libvgpu is not in the process (a
 * workload that escapes the shim; the agent's audit must catch it).
 * --churn: hold MIB, and RATE allocate+free pairs of MIB per second for SECONDS (benchmarks).
 * GPU_JOB_TRACE=1: print "alloc_at=<CLOCK_MONOTONIC ns>" right before the first allocation.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*devget_fn)(CUdevice *, int);
typedef CUresult (*ctx_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (p == NULL) {
        fprintf(stderr, "gpu_job: %s not found in libcuda.so.1\n", name);
        exit(2);
    }
    return p;
}

static unsigned long arg(const char *text, const char *what)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') {
        fprintf(stderr, "gpu_job: %s %s is not a whole number\n", what, text);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    int a = 1;
    if (argc > 1 && strcmp(argv[1], "--bypass") == 0) {
        if (getenv("LD_PRELOAD") != NULL) {
            unsetenv("LD_PRELOAD");
            execv("/proc/self/exe", argv);
            perror("gpu_job: re-exec without LD_PRELOAD");
            return 2;
        }
        a = 2;
    }
    int churn = argc > a && strcmp(argv[a], "--churn") == 0;
    if (churn)
        a++;
    if (argc - a < (churn ? 3 : 2)) {
        fprintf(stderr, "usage: gpu_job [--bypass] ALLOC_MIB HOLD_MS [CHUNK_MIB]\n"
                        "       gpu_job [--bypass] --churn MIB RATE SECONDS\n");
        return 2;
    }
    unsigned long total = arg(argv[a], churn ? "MIB" : "ALLOC_MIB");
    unsigned long hold = arg(argv[a + 1], churn ? "RATE" : "HOLD_MS");
    unsigned long chunk = argc - a > 2 ? arg(argv[a + 2], churn ? "SECONDS" : "CHUNK_MIB")
                                       : total;
    if (chunk == 0)
        chunk = 1;

    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "gpu_job: dlopen(libcuda.so.1): %s\n", dlerror());
        return 2;
    }
    init_fn cu_init = (init_fn)sym(h, "cuInit");
    devget_fn dev_get = (devget_fn)sym(h, "cuDeviceGet");
    ctx_fn ctx_create = (ctx_fn)sym(h, "cuCtxCreate_v2");
    alloc_fn mem_alloc = (alloc_fn)sym(h, "cuMemAlloc_v2");
    free_fn mem_free = (free_fn)sym(h, "cuMemFree_v2");

    CUdevice dev;
    CUcontext ctx;
    if (cu_init(0) != CUDA_SUCCESS || dev_get(&dev, 0) != CUDA_SUCCESS ||
        ctx_create(&ctx, 0, dev) != CUDA_SUCCESS) {
        fprintf(stderr, "gpu_job: no CUDA device\n");
        return 2;
    }
    if (churn) {
        /* total = MiB per allocation, hold = pairs per second, chunk = seconds */
        CUdeviceptr base; /* held for the whole run, so the process is visibly on the GPU */
        if (mem_alloc(&base, (size_t)total << 20) != CUDA_SUCCESS) {
            printf("gpu_job[%d]: out of memory in churn\n", (int)getpid());
            return 3;
        }
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        unsigned long pairs = 0, want = hold * chunk;
        while (pairs < want) {
            CUdeviceptr p;
            if (mem_alloc(&p, (size_t)total << 20) != CUDA_SUCCESS) {
                printf("gpu_job[%d]: out of memory in churn\n", (int)getpid());
                return 3;
            }
            mem_free(p);
            pairs++;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double due = (double)pairs / (double)hold;
            double el = (double)(now.tv_sec - start.tv_sec) +
                        (double)(now.tv_nsec - start.tv_nsec) / 1e9;
            if (due > el) {
                double d = due - el;
                struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        printf("gpu_job[%d]: churned %lu pairs of %lu MiB\n", (int)getpid(), pairs, total);
        mem_free(base);
        return 0;
    }
    if (getenv("GPU_JOB_TRACE") != NULL) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        printf("alloc_at=%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
        fflush(stdout);
    }
    CUdeviceptr ptrs[4096];
    unsigned long n = 0, done = 0;
    while (done < total && n < 4096) {
        unsigned long step = total - done < chunk ? total - done : chunk;
        CUresult rc = mem_alloc(&ptrs[n], (size_t)step << 20);
        if (rc != CUDA_SUCCESS) {
            printf("gpu_job[%d]: out of memory after %lu MiB of %lu (CUresult %d)\n",
                   (int)getpid(), done, total, (int)rc);
            fflush(stdout);
            return 3;
        }
        n++;
        done += step;
    }
    printf("gpu_job[%d]: holding %lu MiB for %lu ms%s\n", (int)getpid(), done, hold,
           a == 2 ? " (bypassing the shim)" : "");
    fflush(stdout);
    struct timespec ts = {(time_t)(hold / 1000), (long)(hold % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    for (unsigned long i = 0; i < n; i++)
        mem_free(ptrs[i]);
    return 0;
}
