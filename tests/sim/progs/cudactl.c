/*
 * cudactl - drive the (simulated) driver from the command line, one step per argument group:
 *   ctx DEV | alloc BYTES | alloc-oom BYTES | allocasync BYTES | vmm BYTES | free INDEX |
 *   launch GRIDX COUNT | duty ON_MS OFF_MS TOTAL_MS | sync | meminfo | sleep MS | ready
 * Every step prints one line; a failed step prints "FAIL <step> rc=<code>" and exits 1.
 * `ready` prints "ready" and waits for a line (or EOF) on stdin, so a test can look at the
 * process from outside while it holds its memory.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cudaload.h"

static CUdeviceptr ptrs[256];
static int nptrs;
static CUfunction kernel;

static void check(CUresult rc, const char *step)
{
    if (rc != CUDA_SUCCESS) {
        printf("FAIL %s rc=%d\n", step, (int)rc);
        exit(1);
    }
}

static unsigned long long num(const char *s)
{
    return strtoull(s, NULL, 0);
}

static void sleep_ms(unsigned long long ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void need_kernel(void)
{
    if (kernel != NULL)
        return;
    CUmodule mod;
    check(p_cuModuleLoadData(&mod, "simulated image"), "cuModuleLoadData");
    check(p_cuModuleGetFunction(&kernel, mod, "busy"), "cuModuleGetFunction");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    cuda_load();
    for (int i = 1; i < argc; i++) {
        const char *step = argv[i];
        if (strcmp(step, "ctx") == 0 && i + 1 < argc) {
            CUcontext ctx;
            int dev = (int)num(argv[++i]);
            check(p_cuInit(0), "cuInit");
            check(p_cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
            check(p_cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
            printf("ctx %d pid %d\n", dev, (int)getpid());
        } else if (strcmp(step, "alloc") == 0 && i + 1 < argc) {
            check(p_cuMemAlloc_v2(&ptrs[nptrs], (size_t)num(argv[++i])), "cuMemAlloc_v2");
            printf("alloc %d 0x%llx\n", nptrs, ptrs[nptrs]);
            nptrs++;
        } else if (strcmp(step, "alloc-oom") == 0 && i + 1 < argc) {
            CUdeviceptr p;
            CUresult rc = p_cuMemAlloc_v2(&p, (size_t)num(argv[++i]));
            if (rc != CUDA_ERROR_OUT_OF_MEMORY)
                check(rc == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : rc, "alloc-oom");
            printf("oom\n");
        } else if (strcmp(step, "allocasync") == 0 && i + 1 < argc) {
            check(p_cuMemAllocAsync(&ptrs[nptrs], (size_t)num(argv[++i]), NULL),
                  "cuMemAllocAsync");
            printf("allocasync %d 0x%llx\n", nptrs, ptrs[nptrs]);
            nptrs++;
        } else if (strcmp(step, "vmm") == 0 && i + 1 < argc) {
            size_t size = (size_t)num(argv[++i]), gran;
            CUmemAllocationProp prop;
            memset(&prop, 0, sizeof prop);
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            check(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                  "cuMemGetAllocationGranularity");
            size = (size + gran - 1) / gran * gran;
            CUmemGenericAllocationHandle h;
            CUdeviceptr va;
            check(p_cuMemCreate(&h, size, &prop, 0), "cuMemCreate");
            check(p_cuMemAddressReserve(&va, size, 0, 0, 0), "cuMemAddressReserve");
            check(p_cuMemMap(va, size, 0, h, 0), "cuMemMap");
            CUmemAccessDesc desc = {.location = prop.location,
                                    .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
            check(p_cuMemSetAccess(va, size, &desc, 1), "cuMemSetAccess");
            printf("vmm 0x%llx %zu\n", va, size);
        } else if (strcmp(step, "free") == 0 && i + 1 < argc) {
            int idx = (int)num(argv[++i]);
            check(p_cuMemFree_v2(ptrs[idx]), "cuMemFree_v2");
            printf("free %d\n", idx);
        } else if (strcmp(step, "launch") == 0 && i + 2 < argc) {
            unsigned gx = (unsigned)num(argv[++i]);
            unsigned long long count = num(argv[++i]);
            need_kernel();
            for (unsigned long long k = 0; k < count; k++)
                check(p_cuLaunchKernel(kernel, gx, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                      "cuLaunchKernel");
            printf("launch %u x%llu\n", gx, count);
        } else if (strcmp(step, "duty") == 0 && i + 3 < argc) {
            unsigned long long on = num(argv[++i]), off = num(argv[++i]), total = num(argv[++i]);
            need_kernel();
            double end = now_ms() + (double)total;
            unsigned long long n = 0;
            while (now_ms() < end) {
                check(p_cuLaunchKernel(kernel, (unsigned)(on * 1000), 1, 1, 1, 1, 1, 0, NULL, NULL,
                                       NULL),
                      "cuLaunchKernel");
                check(p_cuCtxSynchronize(), "cuCtxSynchronize");
                sleep_ms(off);
                n++;
            }
            printf("duty %llu kernels\n", n);
        } else if (strcmp(step, "sync") == 0) {
            check(p_cuCtxSynchronize(), "cuCtxSynchronize");
            printf("sync\n");
        } else if (strcmp(step, "meminfo") == 0) {
            size_t free_bytes, total;
            check(p_cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo_v2");
            printf("meminfo %zu %zu\n", free_bytes, total);
        } else if (strcmp(step, "sleep") == 0 && i + 1 < argc) {
            sleep_ms(num(argv[++i]));
            printf("slept\n");
        } else if (strcmp(step, "ready") == 0) {
            char line[64];
            printf("ready\n");
            if (fgets(line, sizeof line, stdin) == NULL) {
                /* EOF: carry on */
            }
        } else {
            printf("FAIL unknown step '%s'\n", step);
            return 2;
        }
    }
    return 0;
}
