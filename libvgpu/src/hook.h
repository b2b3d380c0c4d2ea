/* hook.h: the hook table generated from hooks.def, and its two lookups. */
#ifndef VGPU_HOOK_H
#define VGPU_HOOK_H

#include <stdint.h>

#include "real.h"

/* For code that sanitizer runtimes may reach through dlsym while they initialize (before their
 * shadow memory exists): never instrumented, in the `asan` build. */
#define VGPU_NO_SANITIZE __attribute__((no_sanitize_address, no_sanitize("undefined")))

/* Every hook is implemented as vgpu_hook_<name> (hidden, with the real prototype, so the
 * compiler checks it) and exported under <name> by VGPU_EXPORT_HOOK(name) beside it. */
#define VGPU_CUDA_HOOK(name, base, since, ptds) extern __typeof__(name) vgpu_hook_##name;
#define VGPU_NVML_HOOK(name) extern __typeof__(name) vgpu_hook_##name;
#include "hooks.def"
#undef VGPU_CUDA_HOOK
#undef VGPU_NVML_HOOK

#define VGPU_EXPORT_HOOK(name)                                                                  \
    extern __typeof__(name) name __attribute__((alias("vgpu_hook_" #name), visibility("default")))

struct vgpu_hook {
    const char *name; /* ABI symbol */
    const char *base; /* cuGetProcAddress name; NULL for NVML */
    int since;        /* lowest cudaVersion */
    int ptds;         /* per-thread default stream variant */
    void *fn;         /* our implementation */
    void **real;      /* where the real entry point is kept */
};

extern const struct vgpu_hook vgpu_hooks[];
extern const unsigned vgpu_hook_count;

/* The hook exported as name, or NULL.  Cheap for names that are not cu* / nvml*. */
const struct vgpu_hook *vgpu_hook_by_name(const char *name);
/* The hook cuGetProcAddress(base, cudaVersion, flags) means, or NULL. */
const struct vgpu_hook *vgpu_hook_for_proc(const char *base, int cuda_version, uint64_t flags);

#endif /* VGPU_HOOK_H */
