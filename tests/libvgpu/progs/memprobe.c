/* memprobe.c: drives every device-memory path of the CUDA driver API from the command line, the
 * way a runtime would reach them, and prints one line per operation:  "<op> rc=<CUresult> ...".
 *
 * Entry points come from (argv[1]):
 *   dlsym     dlopen("libcuda.so.1") + dlsym of the ABI names (what the CUDA runtime does first)
 *   procaddr  dlsym("cuGetProcAddress_v2") then cuGetProcAddress(base name, 13000, flags)
 *   direct    the names linked at build time (-DGW_DIRECT, -lcuda): the exported symbols
 * Operations (argv[2..]):
 *   alloc:N managed:N async:N pool:N vmm:N pitch:W:H array:W:H array3d:W:H:D mip:W:H:LEVELS
 *   free:I (the I-th object created, whatever its kind)  freeunknown  info  total  sync
 *   fill:N (alloc N-byte chunks until refused; prints count)  hold (wait until stdin closes)
 *   ctx:create (cuCtxCreate instead of the primary context; must come first)
 *   stdin (read further operations from stdin, one a line, answering each, until EOF)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"

#define FN(name) static __attribute__((unused)) __typeof__(&name) p_##name;
FN(cuInit) FN(cuDeviceGet) FN(cuDevicePrimaryCtxRetain) FN(cuCtxSetCurrent) FN(cuCtxCreate_v2)
FN(cuMemAlloc_v2) FN(cuMemFree_v2) FN(cuMemAllocManaged) FN(cuMemAllocPitch_v2)
FN(cuMemAllocAsync) FN(cuMemAllocFromPoolAsync) FN(cuMemFreeAsync) FN(cuDeviceGetDefaultMemPool)
FN(cuMemCreate) FN(cuMemRelease) FN(cuArrayCreate_v2) FN(cuArray3DCreate_v2) FN(cuArrayDestroy)
FN(cuMipmappedArrayCreate) FN(cuMipmappedArrayDestroy) FN(cuMemGetInfo_v2)
FN(cuDeviceTotalMem_v2) FN(cuCtxSynchronize) FN(cuGetProcAddress_v2)
#undef FN

enum kind { K_PTR, K_ASYNC, K_VMM, K_ARRAY, K_MIP };
struct obj {
    enum kind kind;
    unsigned long long key;
};
static struct obj objs[100000];
static int nobj;

#ifndef GW_DIRECT
static void *resolve(const char *mode, void *lib, const char *abi, const char *base, int ptds)
{
    if (strcmp(mode, "procaddr") == 0 && p_cuGetProcAddress_v2 != NULL) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        cuuint64_t flags = ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
        if (p_cuGetProcAddress_v2(base, &fn, 13000, flags, &st) == CUDA_SUCCESS)
            return fn;
        return NULL;
    }
    return dlsym(lib, abi);
}
#endif

static void load(const char *mode)
{
#ifdef GW_DIRECT
    (void)mode;
#define L(abi, base) p_##abi = &abi;
#else
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        exit(2);
    }
    p_cuGetProcAddress_v2 = (__typeof__(p_cuGetProcAddress_v2))dlsym(lib, "cuGetProcAddress_v2");
#define L(abi, base) p_##abi = (__typeof__(p_##abi))resolve(mode, lib, #abi, #base, 0);
#endif
    L(cuInit, cuInit) L(cuDeviceGet, cuDeviceGet)
    L(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain) L(cuCtxSetCurrent, cuCtxSetCurrent)
    L(cuCtxCreate_v2, cuCtxCreate) L(cuMemAlloc_v2, cuMemAlloc) L(cuMemFree_v2, cuMemFree)
    L(cuMemAllocManaged, cuMemAllocManaged) L(cuMemAllocPitch_v2, cuMemAllocPitch)
    L(cuMemAllocAsync, cuMemAllocAsync) L(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)
    L(cuMemFreeAsync, cuMemFreeAsync) L(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool)
    L(cuMemCreate, cuMemCreate) L(cuMemRelease, cuMemRelease)
    L(cuArrayCreate_v2, cuArrayCreate) L(cuArray3DCreate_v2, cuArray3DCreate)
    L(cuArrayDestroy, cuArrayDestroy) L(cuMipmappedArrayCreate, cuMipmappedArrayCreate)
    L(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy) L(cuMemGetInfo_v2, cuMemGetInfo)
    L(cuDeviceTotalMem_v2, cuDeviceTotalMem) L(cuCtxSynchronize, cuCtxSynchronize)
#undef L
}

static void add(enum kind k, unsigned long long key)
{
    objs[nobj].kind = k;
    objs[nobj++].key = key;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    int first = 2;
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    load(argv[1]);
    if (p_cuInit == NULL || p_cuMemAlloc_v2 == NULL) {
        fprintf(stderr, "entry points missing\n");
        return 2;
    }
    if (p_cuInit(0) != CUDA_SUCCESS || p_cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
        return 3;
    CUresult crc;
    if (argc > 2 && strcmp(argv[2], "ctx:create") == 0) {
        crc = p_cuCtxCreate_v2(&ctx, 0, dev);
        first = 3;
    } else {
        crc = p_cuDevicePrimaryCtxRetain(&ctx, dev);
        if (crc == CUDA_SUCCESS)
            crc = p_cuCtxSetCurrent(ctx);
    }
    if (crc != CUDA_SUCCESS) {
        printf("ctx rc=%d\n", (int)crc);
        return 3;
    }
    char line[256];
    for (int i = first; i < argc; i++) {
        char *op = argv[i];
        if (strcmp(op, "stdin") == 0) { /* further ops, one a line, until EOF */
            if (fgets(line, sizeof line, stdin) == NULL)
                break;
            line[strcspn(line, "\n")] = '\0';
            op = line;
            i--;
        }
        unsigned long long a = 0, b = 0, c = 0;
        char *arg = strchr(op, ':');
        if (arg != NULL)
            sscanf(arg + 1, "%llu:%llu:%llu", &a, &b, &c);
        CUresult rc = CUDA_SUCCESS;
        if (strncmp(op, "alloc:", 6) == 0) {
            CUdeviceptr p;
            rc = p_cuMemAlloc_v2(&p, a);
            if (rc == CUDA_SUCCESS)
                add(K_PTR, p);
        } else if (strncmp(op, "managed:", 8) == 0) {
            CUdeviceptr p;
            rc = p_cuMemAllocManaged(&p, a, CU_MEM_ATTACH_GLOBAL);
            if (rc == CUDA_SUCCESS)
                add(K_PTR, p);
        } else if (strncmp(op, "async:", 6) == 0) {
            CUdeviceptr p;
            rc = p_cuMemAllocAsync(&p, a, NULL);
            if (rc == CUDA_SUCCESS)
                add(K_ASYNC, p);
        } else if (strncmp(op, "pool:", 5) == 0) {
            CUdeviceptr p;
            CUmemoryPool pool;
            rc = p_cuDeviceGetDefaultMemPool(&pool, dev);
            if (rc == CUDA_SUCCESS)
                rc = p_cuMemAllocFromPoolAsync(&p, a, pool, NULL);
            if (rc == CUDA_SUCCESS)
                add(K_ASYNC, p);
        } else if (strncmp(op, "vmm:", 4) == 0) {
            CUmemGenericAllocationHandle h;
            CUmemAllocationProp prop;
            memset(&prop, 0, sizeof prop);
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            prop.location.id = 0;
            rc = p_cuMemCreate(&h, a, &prop, 0);
            if (rc == CUDA_SUCCESS)
                add(K_VMM, h);
        } else if (strncmp(op, "pitch:", 6) == 0) {
            CUdeviceptr p;
            size_t pitch = 0;
            rc = p_cuMemAllocPitch_v2(&p, &pitch, a, b, 4);
            if (rc == CUDA_SUCCESS)
                add(K_PTR, p);
            printf("pitch=%zu ", pitch);
        } else if (strncmp(op, "array:", 6) == 0) {
            CUarray h;
            CUDA_ARRAY_DESCRIPTOR d = {a, b, CU_AD_FORMAT_FLOAT, 4};
            rc = p_cuArrayCreate_v2(&h, &d);
            if (rc == CUDA_SUCCESS)
                add(K_ARRAY, (unsigned long long)(uintptr_t)h);
        } else if (strncmp(op, "array3d:", 8) == 0) {
            CUarray h;
            CUDA_ARRAY3D_DESCRIPTOR d = {a, b, c, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
            rc = p_cuArray3DCreate_v2(&h, &d);
            if (rc == CUDA_SUCCESS)
                add(K_ARRAY, (unsigned long long)(uintptr_t)h);
        } else if (strncmp(op, "mip:", 4) == 0) {
            CUmipmappedArray h;
            CUDA_ARRAY3D_DESCRIPTOR d = {a, b, 0, CU_AD_FORMAT_HALF, 2, 0};
            rc = p_cuMipmappedArrayCreate(&h, &d, (unsigned)c);
            if (rc == CUDA_SUCCESS)
                add(K_MIP, (unsigned long long)(uintptr_t)h);
        } else if (strncmp(op, "free:", 5) == 0) {
            struct obj *o = &objs[a];
            switch (o->kind) {
            case K_PTR:
                rc = p_cuMemFree_v2(o->key);
                break;
            case K_ASYNC:
                rc = p_cuMemFreeAsync(o->key, NULL);
                if (rc == CUDA_SUCCESS)
                    rc = p_cuCtxSynchronize();
                break;
            case K_VMM:
                rc = p_cuMemRelease(o->key);
                break;
            case K_ARRAY:
                rc = p_cuArrayDestroy((CUarray)(uintptr_t)o->key);
                break;
            case K_MIP:
                rc = p_cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)o->key);
                break;
            }
        } else if (strcmp(op, "freeunknown") == 0) {
            rc = p_cuMemFree_v2((CUdeviceptr)0x7ead0000ull);
        } else if (strcmp(op, "info") == 0) {
            size_t fr = 0, tot = 0;
            rc = p_cuMemGetInfo_v2(&fr, &tot);
            printf("free=%zu total=%zu ", fr, tot);
        } else if (strcmp(op, "total") == 0) {
            size_t tot = 0;
            rc = p_cuDeviceTotalMem_v2(&tot, dev);
            printf("total=%zu ", tot);
        } else if (strcmp(op, "sync") == 0) {
            rc = p_cuCtxSynchronize();
        } else if (strncmp(op, "fill:", 5) == 0) {
            unsigned long long n = 0;
            CUdeviceptr p;
            while (nobj < 100000 && (rc = p_cuMemAlloc_v2(&p, a)) == CUDA_SUCCESS) {
                add(K_PTR, p);
                n++;
            }
            printf("count=%llu ", n);
        } else if (strcmp(op, "hold") == 0) {
            printf("holding\n");
            char buf[16];
            while (read(0, buf, sizeof buf) > 0) {
            }
            continue;
        } else {
            fprintf(stderr, "unknown op %s\n", op);
            return 2;
        }
        printf("%s rc=%d\n", op, (int)rc);
    }
    return 0;
}
