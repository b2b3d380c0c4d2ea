/* dlsymcheck.c: what the shim's dlsym must keep: a hooked name asked of libcuda gives the hook
 * (not the driver's symbol), names it does not hook give exactly the driver's symbol, a handle
 * that lacks a name still gives NULL, and RTLD_NEXT still resolves relative to the caller. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    void *libm = dlopen("libm.so.6", RTLD_NOW);
    if (cuda == NULL || libm == NULL)
        return 2;
    Dl_info info;
    void *alloc = dlsym(cuda, "cuMemAlloc_v2");
    int from_shim = alloc != NULL && dladdr(alloc, &info) && strstr(info.dli_fname, "libvgpu.so") != NULL;
    printf("hooked_from_shim=%d\n", from_shim);
    void *init = dlsym(cuda, "cuInit");
    int init_from_driver = init != NULL && dladdr(init, &info) &&
                           strstr(info.dli_fname, "libcuda") != NULL;
    printf("unhooked_from_driver=%d\n", init_from_driver);
    printf("missing_is_null=%d\n", dlsym(libm, "cuMemAlloc_v2") == NULL);
    printf("unknown_is_null=%d\n", dlsym(cuda, "cuNoSuchFunction") == NULL);
    void *next_malloc = dlsym(RTLD_NEXT, "malloc");
    printf("rtld_next_is_libc=%d\n", next_malloc != NULL && dladdr(next_malloc, &info) &&
                                         strstr(info.dli_fname, "libc.so") != NULL);
    return 0;
}
