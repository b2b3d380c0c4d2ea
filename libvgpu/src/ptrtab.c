/* ptrtab.c: see ptrtab.h. */
#include "ptrtab.h"

#include <stdlib.h>
#include <sys/mman.h>

#define VGPU_KEY_EMPTY 0u
#define VGPU_KEY_TOMB  UINT64_MAX
#define VGPU_KEY_BUSY  (UINT64_MAX - 1)

struct vgpu_ptr_overflow {
    struct vgpu_ptr_overflow *next;
    struct vgpu_ptr_entry e;
};

static struct vgpu_ptr_entry *vgpu_ptrtab_map(unsigned log2)
{
    size_t len = sizeof(struct vgpu_ptr_entry) << log2;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int vgpu_ptrtab_init(struct vgpu_ptrtab *t, unsigned log2)
{
    t->slots = vgpu_ptrtab_map(log2);
    if (t->slots == NULL)
        return -1;
    t->log2 = log2;
    t->mask = (UINT64_C(1) << log2) - 1;
    t->overflow_count = 0;
    t->overflow = NULL;
    pthread_mutex_init(&t->overflow_lock, NULL);
    return 0;
}

void vgpu_ptrtab_reset(struct vgpu_ptrtab *t)
{
    if (t->slots != NULL)
        munmap(t->slots, sizeof(struct vgpu_ptr_entry) << t->log2);
    struct vgpu_ptr_overflow *o = t->overflow;
    while (o != NULL) {
        struct vgpu_ptr_overflow *n = o->next;
        free(o);
        o = n;
    }
    vgpu_ptrtab_init(t, t->log2);
}

static uint64_t vgpu_ptr_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= UINT64_C(0xff51afd7ed558ccd);
    key ^= key >> 33;
    return key;
}

int vgpu_ptrtab_insert(struct vgpu_ptrtab *t, uint64_t key, uint64_t bytes, uint32_t dev,
                       uint32_t aux)
{
    uint64_t h = vgpu_ptr_hash(key);
    for (unsigned i = 0; t->slots != NULL && i < VGPU_PTRTAB_PROBES; i++) {
        struct vgpu_ptr_entry *e = &t->slots[(h + i) & t->mask];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
        if (k != VGPU_KEY_EMPTY && k != VGPU_KEY_TOMB)
            continue;
        if (!__atomic_compare_exchange_n(&e->key, &k, VGPU_KEY_BUSY, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED))
            continue;
        e->bytes = bytes;
        e->dev = dev;
        e->aux = aux;
        __atomic_store_n(&e->key, key, __ATOMIC_RELEASE);
        return 0;
    }
    struct vgpu_ptr_overflow *o = malloc(sizeof *o);
    if (o == NULL)
        return -1;
    o->e = (struct vgpu_ptr_entry){key, bytes, dev, aux};
    pthread_mutex_lock(&t->overflow_lock);
    o->next = t->overflow;
    t->overflow = o;
    __atomic_fetch_add(&t->overflow_count, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&t->overflow_lock);
    return 0;
}

static int vgpu_ptrtab_remove_overflow(struct vgpu_ptrtab *t, uint64_t key,
                                       struct vgpu_ptr_entry *out)
{
    int found = -1;
    pthread_mutex_lock(&t->overflow_lock);
    for (struct vgpu_ptr_overflow **p = &t->overflow; *p != NULL; p = &(*p)->next) {
        if ((*p)->e.key != key)
            continue;
        struct vgpu_ptr_overflow *o = *p;
        *out = o->e;
        *p = o->next;
        free(o);
        __atomic_fetch_sub(&t->overflow_count, 1, __ATOMIC_RELEASE);
        found = 0;
        break;
    }
    pthread_mutex_unlock(&t->overflow_lock);
    return found;
}

int vgpu_ptrtab_remove(struct vgpu_ptrtab *t, uint64_t key, struct vgpu_ptr_entry *out)
{
    uint64_t h = vgpu_ptr_hash(key);
    for (unsigned i = 0; t->slots != NULL && i < VGPU_PTRTAB_PROBES; i++) {
        struct vgpu_ptr_entry *e = &t->slots[(h + i) & t->mask];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == VGPU_KEY_EMPTY)
            break; /* never used past here: inserts fill the first free probe */
        if (k != key)
            continue;
        out->key = key;
        out->bytes = e->bytes; /* stable: only the inserter that published key wrote them */
        out->dev = e->dev;
        out->aux = e->aux;
        if (__atomic_compare_exchange_n(&e->key, &k, VGPU_KEY_TOMB, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return 0;
        return -1; /* another thread freed the same pointer first */
    }
    if (__atomic_load_n(&t->overflow_count, __ATOMIC_ACQUIRE) == 0)
        return -1;
    return vgpu_ptrtab_remove_overflow(t, key, out);
}
