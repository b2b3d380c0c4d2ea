/* slice_probe.c: what a container sees of its GPU slice, printed as key=value lines:
 *   nvml_total=<bytes>   NVML's total memory of the GPU NVIDIA_VISIBLE_DEVICES names (by UUID:
 *                        without an NVIDIA container runtime NVML lists every GPU of the node)
 *   cuda_total=<bytes>   cuMemGetInfo's total in a context on device 0
 *   alloc_within=<rc>    cuMemAlloc of WITHIN bytes (argv[1]); 0 = CUDA_SUCCESS
 *   alloc_beyond=<rc>    then cuMemAlloc of BEYOND bytes (argv[2]); 2 = CUDA_ERROR_OUT_OF_MEMORY
 * then, with argv[3] == "hold", sleeps until killed (holding the allocation). The driver is
 * reached as the CUDA runtime and nvidia-smi reach it: dlopen + dlsym. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"
#include "nvml_api.h"

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (p == NULL) {
        printf("missing=%s\n", name);
        exit(3);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: slice_probe WITHIN BEYOND [hold]\n");
        return 2;
    }
    unsigned long long within = strtoull(argv[1], NULL, 10), beyond = strtoull(argv[2], NULL, 10);
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    void *cu = dlopen("libcuda.so.1", RTLD_NOW);
    if (nv == NULL || cu == NULL) {
        printf("dlopen=%s\n", dlerror());
        return 3;
    }
    nvmlReturn_t (*nvml_init)(void) = (nvmlReturn_t (*)(void))sym(nv, "nvmlInit_v2");
    nvmlReturn_t (*nvml_handle)(const char *, nvmlDevice_t *) =
        (nvmlReturn_t (*)(const char *, nvmlDevice_t *))sym(nv, "nvmlDeviceGetHandleByUUID");
    const char *visible = getenv("NVIDIA_VISIBLE_DEVICES");
    char uuid[96] = "";
    if (visible != NULL)
        snprintf(uuid, sizeof uuid, "%.*s", (int)strcspn(visible, ","), visible);
    nvmlReturn_t (*nvml_mem)(nvmlDevice_t, nvmlMemory_t *) =
        (nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *))sym(nv, "nvmlDeviceGetMemoryInfo");
    nvmlDevice_t dev;
    nvmlMemory_t mem;
    memset(&mem, 0, sizeof mem);
    if (nvml_init() != NVML_SUCCESS || nvml_handle(uuid, &dev) != NVML_SUCCESS ||
        nvml_mem(dev, &mem) != NVML_SUCCESS)
        printf("nvml_error=1\n");
    printf("nvml_total=%llu\n", mem.total);

    CUresult (*init)(unsigned int) = (CUresult (*)(unsigned int))sym(cu, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))sym(cu, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) =
        (CUresult (*)(CUcontext *, CUdevice))sym(cu, "cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = (CUresult (*)(CUcontext))sym(cu, "cuCtxSetCurrent");
    CUresult (*info)(size_t *, size_t *) =
        (CUresult (*)(size_t *, size_t *))sym(cu, "cuMemGetInfo_v2");
    CUresult (*alloc)(CUdeviceptr *, size_t) =
        (CUresult (*)(CUdeviceptr *, size_t))sym(cu, "cuMemAlloc_v2");
    CUdevice d;
    CUcontext ctx;
    size_t free_b = 0, total_b = 0;
    CUdeviceptr a = 0, b = 0;
    if (init(0) != CUDA_SUCCESS || get(&d, 0) != CUDA_SUCCESS ||
        retain(&ctx, d) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS) {
        printf("cuda_error=1\n");
        return 4;
    }
    info(&free_b, &total_b);
    printf("cuda_total=%zu\n", total_b);
    printf("alloc_within=%d\n", (int)alloc(&a, (size_t)within));
    printf("alloc_beyond=%d\n", (int)alloc(&b, (size_t)beyond));
    fflush(stdout);
    if (argc > 3 && strcmp(argv[3], "hold") == 0)
        for (;;)
            pause();
    return 0;
}
