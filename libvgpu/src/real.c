/* real.c: loading the real libcuda and NVML once. */
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>

#include "log.h"

struct vgpu_real_cuda vgpu_cu;
struct vgpu_real_nvml vgpu_nvml;
vgpu_dlsym_fn vgpu_real_dlsym;
int vgpu_cuda_state;
int vgpu_nvml_state;

static pthread_once_t vgpu_cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t vgpu_nvml_once = PTHREAD_ONCE_INIT;

/* reached from dlsym, see hook.h */
__attribute__((no_sanitize_address, no_sanitize("undefined"))) void vgpu_real_dlsym_resolve(void)
{
    if (__atomic_load_n(&vgpu_real_dlsym, __ATOMIC_ACQUIRE) != NULL)
        return;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == NULL)
        p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&vgpu_real_dlsym, (vgpu_dlsym_fn)p, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void vgpu_real_constructor(void)
{
    vgpu_real_dlsym_resolve();
}

static void vgpu_cuda_load_once(void)
{
    vgpu_real_dlsym_resolve();
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL || vgpu_real_dlsym == NULL) {
        vgpu_log(VGPU_LOG_ERROR, "cannot load the CUDA driver libcuda.so.1: %s", dlerror());
        __atomic_store_n(&vgpu_cuda_state, -1, __ATOMIC_RELEASE);
        return;
    }
#define GW_CUDA_FN(name, params) *(void **)&vgpu_cu.name = vgpu_real_dlsym(h, #name);
#include "cuda_api_functions.h"
#include "cuda_api_functions_extra.h"
#undef GW_CUDA_FN
    __atomic_store_n(&vgpu_cuda_state, 1, __ATOMIC_RELEASE);
}

int vgpu_cuda_load(void)
{
    pthread_once(&vgpu_cuda_once, vgpu_cuda_load_once);
    return __atomic_load_n(&vgpu_cuda_state, __ATOMIC_ACQUIRE) == 1 ? 0 : -1;
}

static void vgpu_nvml_load_once(void)
{
    vgpu_real_dlsym_resolve();
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL || vgpu_real_dlsym == NULL) {
        vgpu_log(VGPU_LOG_INFO, "cannot load NVML libnvidia-ml.so.1: %s", dlerror());
        __atomic_store_n(&vgpu_nvml_state, -1, __ATOMIC_RELEASE);
        return;
    }
#define GW_NVML_FN(name, params) *(void **)&vgpu_nvml.name = vgpu_real_dlsym(h, #name);
#include "nvml_api_functions.h"
#undef GW_NVML_FN
    __atomic_store_n(&vgpu_nvml_state, 1, __ATOMIC_RELEASE);
}

int vgpu_nvml_load(void)
{
    pthread_once(&vgpu_nvml_once, vgpu_nvml_load_once);
    return __atomic_load_n(&vgpu_nvml_state, __ATOMIC_ACQUIRE) == 1 ? 0 : -1;
}
