/* unit_budget.c: admission on one region device from many threads at once.  Each thread
 * reserves chunks until refused, then the total admitted must equal the largest multiple of the
 * chunk that fits the limit, and never pass it; then release everything and expect 0.  Also the
 * boundary (limit - 1, limit, limit + 1) and the memory view's arithmetic.  "ok" or failure. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "budget.h"

#define THREADS 8
#define CHUNK 4097u
#define LIMIT (1000u * CHUNK + 123u)

static struct vgpu_region region;
static uint64_t got[THREADS];

static void *worker(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    while (vgpu_budget_reserve(&region, &region.procs[i], 0, CHUNK) == 0) {
        got[i] += CHUNK;
        if (__atomic_load_n(&region.devices[0].used_bytes, __ATOMIC_RELAXED) > LIMIT)
            fprintf(stderr, "limit passed\n");
    }
    return NULL;
}

static int check(int cond, const char *what)
{
    if (!cond)
        fprintf(stderr, "FAILED: %s\n", what);
    return cond ? 0 : 1;
}

int main(void)
{
    int bad = 0;
    pthread_t t[THREADS];
    region.devices[0].limit_bytes = LIMIT;
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    uint64_t total = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += got[i];
        bad |= check(region.procs[i].used_bytes[0] == got[i], "slot counts its own");
    }
    bad |= check(total == 1000u * CHUNK, "admitted exactly what fits");
    bad |= check(region.devices[0].used_bytes == total, "device counter equals the sum");
    bad |= check(region.devices[0].peak_bytes == total, "peak");
    for (unsigned i = 0; i < THREADS; i++)
        vgpu_budget_release(&region, &region.procs[i], 0, got[i]);
    bad |= check(region.devices[0].used_bytes == 0, "all released");

    /* boundary: limit L, exactly L fits, L + 1 does not, L - 1 then 1 fits, then nothing */
    memset(&region, 0, sizeof region);
    region.devices[1].limit_bytes = 1000;
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, 1001) != 0, "limit + 1 refused");
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, 1000) == 0, "limit admitted");
    vgpu_budget_release(&region, NULL, 1, 1000);
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, 999) == 0, "limit - 1 admitted");
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, 1) == 0, "the last byte admitted");
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, 1) != 0, "nothing more");
    bad |= check(region.devices[1].oom_count == 2, "refusals counted");
    bad |= check(vgpu_budget_reserve(&region, NULL, 1, UINT64_MAX) != 0, "huge refused");
    vgpu_budget_release(&region, NULL, 1, 5000); /* more than counted: clamps at 0 */
    bad |= check(region.devices[1].used_bytes == 0, "release never underflows");

    /* views */
    region.devices[2].limit_bytes = VGPU_LIMIT_NONE;
    struct vgpu_mem_view v = vgpu_budget_view(&region, 2, 30, 100);
    bad |= check(v.total == 100 && v.free == 30 && v.used == 70, "no limit: physical");
    region.devices[2].limit_bytes = 50;
    region.devices[2].used_bytes = 10;
    v = vgpu_budget_view(&region, 2, 30, 100);
    bad |= check(v.total == 50 && v.used == 10 && v.free == 30, "free capped by physical");
    region.devices[2].used_bytes = 80; /* over the limit (limit lowered at run time) */
    v = vgpu_budget_view(&region, 2, 30, 100);
    bad |= check(v.total == 50 && v.used == 80 && v.free == 0, "no underflow");
    puts(bad ? "FAILED" : "ok");
    return bad;
}
