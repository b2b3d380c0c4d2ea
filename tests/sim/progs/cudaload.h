/*
 * cudaload.h - reach the driver like the CUDA runtime does: dlopen("libcuda.so.1") and dlsym
 * every entry point of cuda_api_functions.h into a pointer named p_<name>.
 * A test program calls cuda_load() once, then p_cuInit(0), p_cuMemAlloc_v2(...), ...
 */
#ifndef GW_TEST_CUDALOAD_H
#define GW_TEST_CUDALOAD_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_api.h"

#define GW_CUDA_FN(name, params) static CUresult (*p_##name) params;
#include "cuda_api_functions.h"
#undef GW_CUDA_FN

static void *cuda_handle;

static void cuda_load(void)
{
    cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda_handle == NULL) {
        fprintf(stderr, "dlopen(libcuda.so.1): %s\n", dlerror());
        exit(2);
    }
#define GW_CUDA_FN(name, params) *(void **)&p_##name = dlsym(cuda_handle, #name);
#include "cuda_api_functions.h"
#undef GW_CUDA_FN
}

#endif
