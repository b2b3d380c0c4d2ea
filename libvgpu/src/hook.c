/* hook.c: the table of hooks (from hooks.def) and its lookups by name and by version. */
#include "hook.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

const struct vgpu_hook vgpu_hooks[] = {
#define VGPU_CUDA_HOOK(name, base, since, ptds)                                                 \
    {#name, #base, since, ptds, (void *)&vgpu_hook_##name, (void **)&vgpu_cu.name},
#define VGPU_NVML_HOOK(name) {#name, NULL, 0, 0, (void *)&vgpu_hook_##name, (void **)&vgpu_nvml.name},
#include "hooks.def"
#undef VGPU_CUDA_HOOK
#undef VGPU_NVML_HOOK
};
const unsigned vgpu_hook_count = sizeof vgpu_hooks / sizeof vgpu_hooks[0];

/* indexes of CUDA hooks sorted by (base, since), built once */
static unsigned vgpu_by_base[sizeof vgpu_hooks / sizeof vgpu_hooks[0]];
static unsigned vgpu_by_base_count;
static pthread_once_t vgpu_by_base_once = PTHREAD_ONCE_INIT;

VGPU_NO_SANITIZE static int vgpu_cmp_name(const void *key, const void *elem)
{
    return strcmp(key, ((const struct vgpu_hook *)elem)->name);
}

VGPU_NO_SANITIZE const struct vgpu_hook *vgpu_hook_by_name(const char *name)
{
    if (name == NULL || !((name[0] == 'c' && name[1] == 'u') || name[0] == 'n'))
        return NULL;
    return bsearch(name, vgpu_hooks, vgpu_hook_count, sizeof vgpu_hooks[0], vgpu_cmp_name);
}

static int vgpu_cmp_base(const void *a, const void *b)
{
    const struct vgpu_hook *x = &vgpu_hooks[*(const unsigned *)a];
    const struct vgpu_hook *y = &vgpu_hooks[*(const unsigned *)b];
    int c = strcmp(x->base, y->base);
    if (c != 0)
        return c;
    if (x->since != y->since)
        return x->since < y->since ? -1 : 1;
    return x->ptds - y->ptds;
}

static void vgpu_by_base_build(void)
{
    for (unsigned i = 1; i < vgpu_hook_count; i++)
        if (strcmp(vgpu_hooks[i - 1].name, vgpu_hooks[i].name) >= 0)
            vgpu_log(VGPU_LOG_ERROR, "internal: hooks.def is not sorted at %s",
                     vgpu_hooks[i].name);
    for (unsigned i = 0; i < vgpu_hook_count; i++)
        if (vgpu_hooks[i].base != NULL)
            vgpu_by_base[vgpu_by_base_count++] = i;
    qsort(vgpu_by_base, vgpu_by_base_count, sizeof vgpu_by_base[0], vgpu_cmp_base);
}

const struct vgpu_hook *vgpu_hook_for_proc(const char *base, int cuda_version, uint64_t flags)
{
    pthread_once(&vgpu_by_base_once, vgpu_by_base_build);
    if (base == NULL)
        return NULL;
    /* lower bound of base */
    unsigned lo = 0, hi = vgpu_by_base_count;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (strcmp(vgpu_hooks[vgpu_by_base[mid]].base, base) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct vgpu_hook *best = NULL, *best_plain = NULL;
    for (unsigned i = lo; i < vgpu_by_base_count; i++) {
        const struct vgpu_hook *h = &vgpu_hooks[vgpu_by_base[i]];
        if (strcmp(h->base, base) != 0)
            break;
        if (h->since > cuda_version)
            continue;
        if (h->ptds == want_ptds)
            best = h; /* sorted by since: the last match is the newest version */
        if (!h->ptds)
            best_plain = h;
    }
    if (best == NULL)
        best = best_plain; /* no per-thread variant: the plain one serves both */
    if (best == NULL || *best->real == NULL)
        return NULL;
    return best;
}
