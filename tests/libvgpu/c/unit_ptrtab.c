/* unit_ptrtab.c: the pointer table under load.  A tiny table (2^6 entries) forces bounded
 * probing and the overflow list; 4 threads insert and remove disjoint keys concurrently; every
 * key must come back with its own size exactly once, and unknown keys must miss.
 * Prints "ok" or the first failure (exit 1). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ptrtab.h"

#define THREADS 4
#define KEYS 400

static struct vgpu_ptrtab tab;
static int failed;

static void *worker(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * 1000000u + 0x7f0000000000u;
    for (int round = 0; round < 10; round++) {
        for (uint64_t k = 0; k < KEYS; k++)
            if (vgpu_ptrtab_insert(&tab, base + k * 512, k + 1, (uint32_t)(k % 16), 0) != 0)
                __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
        for (uint64_t k = 0; k < KEYS; k++) {
            struct vgpu_ptr_entry e;
            if (vgpu_ptrtab_remove(&tab, base + k * 512, &e) != 0 || e.bytes != k + 1 ||
                e.dev != k % 16) {
                fprintf(stderr, "key %llu: lost or wrong entry\n", (unsigned long long)k);
                __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
                return NULL;
            }
            if (vgpu_ptrtab_remove(&tab, base + k * 512, &e) == 0) {
                fprintf(stderr, "key %llu removed twice\n", (unsigned long long)k);
                __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
                return NULL;
            }
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    struct vgpu_ptr_entry e;
    if (vgpu_ptrtab_init(&tab, 6) != 0)
        return 1;
    for (uintptr_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    if (vgpu_ptrtab_remove(&tab, 0x1234, &e) == 0) {
        fprintf(stderr, "unknown key found\n");
        failed = 1;
    }
    if (tab.overflow_count != 0) {
        fprintf(stderr, "overflow list not empty: %u\n", tab.overflow_count);
        failed = 1;
    }
    /* a large table: inserts of sequential 2 MiB-aligned pointers never need the overflow list */
    struct vgpu_ptrtab big;
    vgpu_ptrtab_init(&big, 16);
    for (uint64_t k = 0; k < 30000; k++)
        vgpu_ptrtab_insert(&big, 0x7f0000000000u + (k << 21), k, 0, 0);
    if (big.overflow_count != 0) {
        fprintf(stderr, "big table used the overflow list for %u keys\n", big.overflow_count);
        failed = 1;
    }
    puts(failed ? "FAILED" : "ok");
    return failed;
}
