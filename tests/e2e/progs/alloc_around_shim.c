/* alloc_around_shim: a process that runs with libvgpu preloaded but allocates around it, as a
 * hostile tenant would: glibc's own dlsym (dlvsym(RTLD_NEXT, "dlsym", ...), past the shim's
 * dlsym interposer) looks up the driver's real cuMemAlloc_v2.
 *
 *   alloc_around_shim SHIM_MIB AROUND_MIB HOLD_MS
 *
 * Creates a context on device 0, allocates SHIM_MIB through the shim (one call), then AROUND_MIB
 * around it in 64 MiB calls, prints "holding", holds HOLD_MS milliseconds and exits 0.  Exit 3
 * when the shim refuses its part; 2 on a setup error. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cuda_api.h"

typedef void *(*dlsym_fn)(void *, const char *);

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: alloc_around_shim SHIM_MIB AROUND_MIB HOLD_MS\n");
        return 2;
    }
    unsigned long shim_mib = strtoul(argv[1], NULL, 10), around_mib = strtoul(argv[2], NULL, 10);
    long hold_ms = strtol(argv[3], NULL, 10);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    dlsym_fn real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (real_dlsym == NULL)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (h == NULL || real_dlsym == NULL) {
        fprintf(stderr, "alloc_around_shim: no libcuda.so.1 or no glibc dlsym\n");
        return 2;
    }
    CUresult (*init)(unsigned int) = (CUresult (*)(unsigned int))dlsym(h, "cuInit");
    CUresult (*dev_get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*ctx_create)(CUcontext *, unsigned int, CUdevice) =
        (CUresult (*)(CUcontext *, unsigned int, CUdevice))dlsym(h, "cuCtxCreate_v2");
    CUresult (*shim_alloc)(CUdeviceptr *, size_t) =
        (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2");
    CUresult (*real_alloc)(CUdeviceptr *, size_t) =
        (CUresult (*)(CUdeviceptr *, size_t))real_dlsym(h, "cuMemAlloc_v2");
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (init == NULL || dev_get == NULL || ctx_create == NULL || shim_alloc == NULL ||
        real_alloc == NULL || init(0) != CUDA_SUCCESS || dev_get(&dev, 0) != CUDA_SUCCESS ||
        ctx_create(&ctx, 0, dev) != CUDA_SUCCESS) {
        fprintf(stderr, "alloc_around_shim: no CUDA device\n");
        return 2;
    }
    if (shim_mib > 0 && shim_alloc(&p, (size_t)shim_mib << 20) != CUDA_SUCCESS) {
        printf("refused by the shim\n");
        return 3;
    }
    for (unsigned long done = 0; done < around_mib; done += 64) {
        if (real_alloc(&p, (size_t)64 << 20) != CUDA_SUCCESS) {
            fprintf(stderr, "alloc_around_shim: the driver refused\n");
            return 2;
        }
    }
    printf("holding\n");
    fflush(stdout);
    struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
