/* dlsym.c: see dlsym.h.
 *
 * RTLD_NEXT is resolved by glibc relative to its caller's object, so that case is forwarded as a
 * tail call (the caller's return address stays on the stack): it is never intercepted.
 * Everything else is looked up for real first; only a name the real library exports and
 * hooks.def lists is answered with the hook, so a handle that lacks the name still gets NULL. */
#include "dlsym.h"

#include <dlfcn.h>
#include <stddef.h>

#include "hook.h"

VGPU_NO_SANITIZE static void *vgpu_dlsym_hooked(void *handle, const char *name)
{
    void *p = vgpu_real_dlsym(handle, name);
    if (p == NULL)
        return NULL;
    const struct vgpu_hook *h = vgpu_hook_by_name(name);
    if (h == NULL)
        return p;
    /* make sure the hook has its real counterpart before handing it out */
    int ready = h->base != NULL ? vgpu_cuda_ready() : vgpu_nvml_ready();
    if (ready != 0 || *h->real == NULL)
        return p;
    return h->fn;
}

/* Sanitizer runtimes call dlsym(RTLD_NEXT, ...) while they initialize, before their shadow
 * memory exists: this entry must not be instrumented (in the `asan` build). */
VGPU_NO_SANITIZE __attribute__((optimize("optimize-sibling-calls"))) void *
vgpu_dlsym(void *handle, const char *name)
{
    if (__builtin_expect(vgpu_real_dlsym == NULL, 0))
        vgpu_real_dlsym_resolve();
    if (handle == RTLD_NEXT)
        return vgpu_real_dlsym(handle, name); /* tail call: see above */
    return vgpu_dlsym_hooked(handle, name);
}

extern __typeof__(dlsym) dlsym __attribute__((alias("vgpu_dlsym"), visibility("default")));
