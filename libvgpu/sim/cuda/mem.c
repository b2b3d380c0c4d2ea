/* mem.c - device memory: plain, pitched, managed, stream-ordered (pools), VMM, arrays. */
#include <stdlib.h>
#include <string.h>

#include "cudasim.h"

#define GWSIM_VA_BASE 0x100000000000ULL

enum alloc_kind { ALLOC_DEVICE = 1, ALLOC_POOL = 2 };

struct alloc {
    CUdeviceptr ptr; /* 0 = empty slot, 1 = tombstone */
    uint64_t size;   /* bytes charged (device) or taken from the pool (pool) */
    struct CUctx_st *ctx;
    struct CUmemPoolHandle_st *pool;
    int device;
    int kind;
};

/* Open-addressing table of live allocations, keyed by address (lock held). */
static struct alloc *g_allocs;
static size_t g_alloc_cap, g_alloc_used;

/* VMM bookkeeping: reservations and mappings (lock held). */
struct range {
    CUdeviceptr base;
    uint64_t size;
    struct gwsim_phys *phys;
};
static struct range *g_reserved, *g_mapped;
static size_t g_nreserved, g_nmapped, g_cap_reserved, g_cap_mapped;

uint64_t gwsim_new_va(uint64_t size, uint64_t align)
{
    if (g_sim.next_va == 0)
        g_sim.next_va = GWSIM_VA_BASE;
    uint64_t va = gwsim_round_up(g_sim.next_va, align);
    g_sim.next_va = va + gwsim_round_up(size ? size : 1, GWSIM_ALIGN);
    return va;
}

static size_t slot_of(CUdeviceptr ptr, size_t cap)
{
    uint64_t h = ptr * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 20) & (cap - 1);
}

static int alloc_grow(void)
{
    size_t cap = g_alloc_cap ? g_alloc_cap * 2 : 1024;
    struct alloc *t = calloc(cap, sizeof *t);
    if (t == NULL)
        return -1;
    for (size_t i = 0; i < g_alloc_cap; i++) {
        if (g_allocs[i].ptr <= 1)
            continue;
        size_t j = slot_of(g_allocs[i].ptr, cap);
        while (t[j].ptr != 0)
            j = (j + 1) & (cap - 1);
        t[j] = g_allocs[i];
    }
    free(g_allocs);
    g_allocs = t;
    g_alloc_cap = cap;
    return 0;
}

static int alloc_insert(const struct alloc *a)
{
    if ((g_alloc_used + 1) * 2 > g_alloc_cap && alloc_grow() != 0)
        return -1;
    size_t j = slot_of(a->ptr, g_alloc_cap);
    while (g_allocs[j].ptr > 1)
        j = (j + 1) & (g_alloc_cap - 1);
    if (g_allocs[j].ptr == 0)
        g_alloc_used++;
    g_allocs[j] = *a;
    return 0;
}

static struct alloc *alloc_find(CUdeviceptr ptr)
{
    if (g_alloc_cap == 0 || ptr <= 1)
        return NULL;
    size_t j = slot_of(ptr, g_alloc_cap);
    while (g_allocs[j].ptr != 0) {
        if (g_allocs[j].ptr == ptr)
            return &g_allocs[j];
        j = (j + 1) & (g_alloc_cap - 1);
    }
    return NULL;
}

/* ---- pools ------------------------------------------------------------------------------- */
static struct CUmemPoolHandle_st *default_pool(int device)
{
    struct CUmemPoolHandle_st *p = &g_sim.pools[device];
    if (p->magic != GWSIM_M_POOL) {
        memset(p, 0, sizeof *p);
        p->magic = GWSIM_M_POOL;
        p->alive = 1;
        p->device = device;
        p->is_default = 1;
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    }
    return p;
}

static struct CUmemPoolHandle_st *current_pool(int device)
{
    struct CUmemPoolHandle_st *p = g_sim.current_pool[device];
    return p && p->alive ? p : default_pool(device);
}

static int pool_known(const struct CUmemPoolHandle_st *p)
{
    return p >= &g_sim.pools[0] && p < &g_sim.pools[GWSIM_MAX_POOLS] && p->magic == GWSIM_M_POOL &&
           p->alive;
}

/* Release reserved memory down to max(keep, used), in whole granules. */
static void pool_trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t floor = gwsim_round_up(keep > p->used ? keep : p->used, GWSIM_GRANULARITY);
    if (p->reserved > floor) {
        gwsim_uncharge((unsigned)p->device, p->reserved - floor);
        p->reserved = floor;
    }
}

void gwsim_trim_pools(int device)
{
    for (unsigned i = 0; i < GWSIM_MAX_POOLS; i++) {
        struct CUmemPoolHandle_st *p = &g_sim.pools[i];
        if (p->magic == GWSIM_M_POOL && p->alive && p->device == device)
            pool_trim(p, p->threshold);
    }
}

static CUresult pool_take(struct CUmemPoolHandle_st *p, uint64_t size)
{
    if (p->used + size > p->reserved) {
        uint64_t grow = gwsim_round_up(p->used + size - p->reserved, GWSIM_GRANULARITY);
        if (gwsim_charge((unsigned)p->device, grow) != 0) {
            pool_trim(p, 0); /* give back what is unused, then try once more */
            grow = gwsim_round_up(p->used + size - p->reserved, GWSIM_GRANULARITY);
            if (gwsim_charge((unsigned)p->device, grow) != 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        p->reserved += grow;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    return CUDA_SUCCESS;
}

/* ---- freeing ----------------------------------------------------------------------------- */
static void release_alloc(struct alloc *a)
{
    if (a->kind == ALLOC_POOL) {
        if (a->pool->alive)
            a->pool->used -= a->size;
    } else {
        gwsim_uncharge((unsigned)a->device, a->size);
    }
    a->ptr = 1; /* tombstone */
}

void gwsim_free_ctx_memory(struct CUctx_st *ctx)
{
    for (size_t i = 0; i < g_alloc_cap; i++)
        if (g_allocs[i].ptr > 1 && g_allocs[i].ctx == ctx)
            release_alloc(&g_allocs[i]);
    if (ctx->primary) { /* pools belong to the device's primary context here */
        for (unsigned i = 0; i < GWSIM_MAX_POOLS; i++) {
            struct CUmemPoolHandle_st *p = &g_sim.pools[i];
            if (p->magic == GWSIM_M_POOL && p->alive && p->device == ctx->device) {
                p->used = 0;
                pool_trim(p, 0);
            }
        }
    }
}

/* ---- plain allocations ------------------------------------------------------------------- */
static CUresult alloc_device(CUdeviceptr *dptr, uint64_t bytes)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t charged = gwsim_round_up(bytes, GWSIM_ALIGN);
    if (gwsim_charge((unsigned)ctx->device, charged) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_sim.lock);
    struct alloc a = {.ptr = gwsim_new_va(charged, GWSIM_ALIGN), .size = charged, .ctx = ctx,
                      .device = ctx->device, .kind = ALLOC_DEVICE};
    int bad = alloc_insert(&a);
    pthread_mutex_unlock(&g_sim.lock);
    if (bad) {
        gwsim_uncharge((unsigned)ctx->device, charged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = a.ptr;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return alloc_device(dptr, bytesize);
}

GWSIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                         size_t Height, unsigned int ElementSizeBytes)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t pitch = gwsim_round_up(WidthInBytes, GWSIM_ALIGN);
    rc = alloc_device(dptr, pitch * Height);
    if (rc == CUDA_SUCCESS)
        *pPitch = (size_t)pitch;
    return rc;
}

GWSIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    /* Charged to the device at once (a real driver migrates pages on touch): gpuwarden counts
     * managed memory against a slice, so the simulation does too. */
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return gwsim_check_init() != CUDA_SUCCESS ? CUDA_ERROR_NOT_INITIALIZED
                                                   : CUDA_ERROR_INVALID_VALUE;
    return alloc_device(dptr, bytesize);
}

GWSIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct alloc *a = alloc_find(dptr);
    if (a == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        release_alloc(a);
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (free_bytes == NULL || total == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct gwsim_state *st = gwsim_state();
    gwsim_reclaim_dead(st);
    const struct gwsim_device *d = &st->dev[ctx->device];
    uint64_t used = __atomic_load_n(&d->used_bytes, __ATOMIC_ACQUIRE);
    *total = (size_t)d->total_bytes;
    *free_bytes = (size_t)(used >= d->total_bytes ? 0 : d->total_bytes - used);
    return CUDA_SUCCESS;
}

/* ---- stream-ordered allocator ------------------------------------------------------------ */
static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytesize,
                                struct CUmemPoolHandle_st *pool, CUstream hStream)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (dptr == NULL || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (hStream != NULL && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD &&
        (hStream->magic != GWSIM_M_STREAM || !hStream->alive))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t size = gwsim_round_up(bytesize, GWSIM_ALIGN);
    pthread_mutex_lock(&g_sim.lock);
    if (pool == NULL)
        pool = current_pool(ctx->device);
    rc = pool_take(pool, size);
    struct alloc a = {.size = size, .ctx = &g_sim.ctx[pool->device], .pool = pool,
                      .device = pool->device, .kind = ALLOC_POOL};
    if (rc == CUDA_SUCCESS) {
        a.ptr = gwsim_new_va(size, GWSIM_ALIGN);
        if (alloc_insert(&a) != 0) {
            pool->used -= size;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (rc == CUDA_SUCCESS)
        *dptr = a.ptr;
    return rc;
}

GWSIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_from_pool(dptr, bytesize, NULL, hStream);
}

GWSIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pool_known(pool))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}

GWSIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    if (hStream != NULL && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD &&
        (hStream->magic != GWSIM_M_STREAM || !hStream->alive))
        return gwsim_check_init() != CUDA_SUCCESS ? CUDA_ERROR_NOT_INITIALIZED
                                                   : CUDA_ERROR_INVALID_HANDLE;
    return cuMemFree_v2(dptr); /* back to its pool (kept reserved) or to the device */
}

/* The two pool getters differ only in which pool of the device they return. */
static CUresult get_pool(CUmemoryPool *out, CUdevice dev,
                         struct CUmemPoolHandle_st *(*which)(int device))
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (out == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    *out = which(dev);
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    return get_pool(pool_out, dev, default_pool);
}

GWSIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return get_pool(pool, dev, current_pool);
}

/* A device location's physical device (its id is an ordinal among the visible devices). */
static CUresult check_location(const CUmemLocation *loc, int *phys)
{
    CUdevice dev = loc->id;
    CUresult rc;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) == CUDA_SUCCESS)
        *phys = dev;
    return rc;
}

GWSIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pool == NULL || poolProps == NULL || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = 0;
    if ((rc = check_location(&poolProps->location, &phys)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct CUmemPoolHandle_st *p = NULL;
    for (unsigned i = GWSIM_MAX_DEVICES; i < GWSIM_MAX_POOLS && p == NULL; i++)
        if (!g_sim.pools[i].alive)
            p = &g_sim.pools[i];
    if (p != NULL) {
        memset(p, 0, sizeof *p);
        p->magic = GWSIM_M_POOL;
        p->alive = 1;
        p->device = phys;
        p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = p;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    if (!pool_known(pool) || pool->is_default) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (size_t i = 0; i < g_alloc_cap; i++) /* its allocations die with it */
            if (g_allocs[i].ptr > 1 && g_allocs[i].pool == pool)
                g_allocs[i].ptr = 1;
        pool->used = 0;
        pool_trim(pool, 0);
        pool->alive = 0;
        if (g_sim.current_pool[pool->device] == pool)
            g_sim.current_pool[pool->device] = NULL;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    if (!pool_known(pool))
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        pool_trim(pool, minBytesToKeep);
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (value == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    if (!pool_known(pool)) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    uint64_t *u = value;
    int *i = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        if (set)
            pool->reuse[attr - 1] = *i;
        else
            *i = pool->reuse[attr - 1];
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            pool->threshold = *u;
        else
            *u = pool->threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        if (set)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *u = attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? pool->used : pool->reserved;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
        uint64_t *field = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? &pool->used_high
                                                                : &pool->reserved_high;
        if (!set)
            *u = *field;
        else if (*u != 0) /* may only be reset to zero, i.e. to the current value */
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *field = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? pool->used : pool->reserved;
        break;
    }
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
    }
out:
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void *value)
{
    return pool_attribute(pool, attr, value, 1);
}

GWSIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void *value)
{
    return pool_attribute(pool, attr, value, 0);
}

/* ---- virtual memory management ----------------------------------------------------------- */
static int push_range(struct range **arr, size_t *n, size_t *cap, struct range r)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct range *t = realloc(*arr, ncap * sizeof *t);
        if (t == NULL)
            return -1;
        *arr = t;
        *cap = ncap;
    }
    (*arr)[(*n)++] = r;
    return 0;
}

/* cuMemCreate handles are numbers (a tag and an index into g_phys), never pointers, so any
 * value a caller passes is checked safely (lock held). */
#define GWSIM_PHYS_TAG 0x5A00000000000000ULL
static struct gwsim_phys **g_phys;
static size_t g_nphys, g_cap_phys;

static struct gwsim_phys *phys_of(CUmemGenericAllocationHandle h)
{
    if ((h & 0xFF00000000000000ULL) != GWSIM_PHYS_TAG)
        return NULL;
    uint64_t i = (h & ~0xFF00000000000000ULL) - 1;
    if (i >= g_nphys)
        return NULL;
    struct gwsim_phys *p = g_phys[i];
    return p->magic == GWSIM_M_PHYS && !p->released ? p : NULL;
}

static int phys_register(struct gwsim_phys *p, CUmemGenericAllocationHandle *out)
{
    if (g_nphys == g_cap_phys) {
        size_t ncap = g_cap_phys ? g_cap_phys * 2 : 64;
        struct gwsim_phys **t = realloc(g_phys, ncap * sizeof *t);
        if (t == NULL)
            return -1;
        g_phys = t;
        g_cap_phys = ncap;
    }
    g_phys[g_nphys++] = p;
    *out = GWSIM_PHYS_TAG | g_nphys;
    return 0;
}

GWSIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                    const CUmemAllocationProp *prop,
                                                    CUmemAllocationGranularity_flags option)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (granularity == NULL || prop == NULL || option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = 0;
    if ((rc = check_location(&prop->location, &phys)) != CUDA_SUCCESS)
        return rc;
    *granularity = (size_t)GWSIM_GRANULARITY;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                  const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (handle == NULL || prop == NULL || flags != 0 || size == 0 ||
        size % GWSIM_GRANULARITY != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int phys = 0;
    if ((rc = check_location(&prop->location, &phys)) != CUDA_SUCCESS)
        return rc;
    struct gwsim_phys *p = calloc(1, sizeof *p);
    if (p == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (gwsim_charge((unsigned)phys, size) != 0) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->magic = GWSIM_M_PHYS;
    p->device = phys;
    p->size = size;
    pthread_mutex_lock(&g_sim.lock);
    int bad = phys_register(p, handle);
    pthread_mutex_unlock(&g_sim.lock);
    if (bad) {
        gwsim_uncharge((unsigned)p->device, size);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* Physical memory is given back when it is released and no longer mapped (lock held). */
static void phys_maybe_free(struct gwsim_phys *p)
{
    if (p->released && p->mapped == 0 && p->size != 0) {
        gwsim_uncharge((unsigned)p->device, p->size);
        p->size = 0; /* the handle object stays, dead, so a stale handle is caught */
    }
}

GWSIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_phys *p = phys_of(handle);
    if (p == NULL) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        p->released = 1;
        phys_maybe_free(p);
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                          CUdeviceptr addr, unsigned long long flags)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    (void)addr; /* a hint only */
    if (ptr == NULL || size == 0 || size % GWSIM_GRANULARITY != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > GWSIM_GRANULARITY ? alignment : GWSIM_GRANULARITY;
    pthread_mutex_lock(&g_sim.lock);
    struct range r = {.base = gwsim_new_va(size, align), .size = size};
    if (push_range(&g_reserved, &g_nreserved, &g_cap_reserved, r) != 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_sim.lock);
    if (rc == CUDA_SUCCESS)
        *ptr = r.base;
    return rc;
}

GWSIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g_nreserved; i++) {
        if (g_reserved[i].base == ptr && g_reserved[i].size == size) {
            g_reserved[i] = g_reserved[--g_nreserved];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

static int inside_reservation(CUdeviceptr ptr, uint64_t size)
{
    for (size_t i = 0; i < g_nreserved; i++)
        if (ptr >= g_reserved[i].base && ptr + size <= g_reserved[i].base + g_reserved[i].size)
            return 1;
    return 0;
}

static int overlaps_mapping(CUdeviceptr ptr, uint64_t size)
{
    for (size_t i = 0; i < g_nmapped; i++)
        if (ptr < g_mapped[i].base + g_mapped[i].size && g_mapped[i].base < ptr + size)
            return 1;
    return 0;
}

GWSIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                               CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (size == 0 || flags != 0 || size % GWSIM_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_phys *p = phys_of(handle);
    if (p == NULL || offset > p->size || size > p->size - offset ||
        !inside_reservation(ptr, size) || overlaps_mapping(ptr, size)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        struct range r = {.base = ptr, .size = size, .phys = p};
        if (push_range(&g_mapped, &g_nmapped, &g_cap_mapped, r) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            p->mapped++;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g_nmapped;) {
        struct range m = g_mapped[i];
        if (m.base >= ptr && m.base + m.size <= ptr + size) {
            g_mapped[i] = g_mapped[--g_nmapped];
            m.phys->mapped--;
            phys_maybe_free(m.phys);
            rc = CUDA_SUCCESS;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                     size_t count)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (desc == NULL || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        int phys = 0;
        if ((rc = check_location(&desc[i].location, &phys)) != CUDA_SUCCESS)
            return rc;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* The whole range must be mapped: walk it mapping by mapping. */
    pthread_mutex_lock(&g_sim.lock);
    CUdeviceptr at = ptr, end = ptr + size;
    while (at < end) {
        size_t i = 0;
        while (i < g_nmapped && !(g_mapped[i].base <= at && at < g_mapped[i].base + g_mapped[i].size))
            i++;
        if (i == g_nmapped)
            break;
        at = g_mapped[i].base + g_mapped[i].size;
    }
    pthread_mutex_unlock(&g_sim.lock);
    return at >= end ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- arrays ------------------------------------------------------------------------------ */
static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static CUresult array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch,
                            unsigned levels, uint64_t *out)
{
    uint64_t elem = format_bytes(f);
    if (w == 0 || elem == 0 || (ch != 1 && ch != 2 && ch != 4) || levels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = 0;
    uint64_t lw = w, lh = h ? h : 1, ld = d ? d : 1;
    for (unsigned l = 0; l < levels; l++) {
        total += gwsim_round_up(lw * elem * ch, GWSIM_ALIGN) * lh * ld;
        lw = lw > 1 ? lw / 2 : 1;
        lh = lh > 1 ? lh / 2 : 1;
        ld = ld > 1 ? ld / 2 : 1;
    }
    *out = total;
    return CUDA_SUCCESS;
}

static CUresult array_create(struct CUarray_st **out, uint64_t bytes)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUarray_st *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (gwsim_charge((unsigned)ctx->device, bytes) != 0) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Tracked like an allocation so that its context's death frees it. */
    pthread_mutex_lock(&g_sim.lock);
    struct alloc rec = {.ptr = (CUdeviceptr)(uintptr_t)a, .size = bytes, .ctx = ctx,
                        .device = ctx->device, .kind = ALLOC_DEVICE};
    int bad = alloc_insert(&rec);
    pthread_mutex_unlock(&g_sim.lock);
    if (bad) {
        gwsim_uncharge((unsigned)ctx->device, bytes);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->magic = GWSIM_M_ARRAY;
    a->alive = 1;
    a->device = ctx->device;
    a->ctx = ctx;
    a->bytes = bytes;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(struct CUarray_st *a)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (a == NULL || a->magic != GWSIM_M_ARRAY || !a->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_sim.lock);
    struct alloc *rec = alloc_find((CUdeviceptr)(uintptr_t)a);
    if (rec != NULL)
        release_alloc(rec);
    a->alive = 0; /* kept, dead, so a second destroy is caught */
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes;
    if (pHandle == NULL || desc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    rc = array_bytes(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels, 1, &bytes);
    return rc != CUDA_SUCCESS ? rc : array_create((struct CUarray_st **)pHandle, bytes);
}

GWSIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes;
    if (pHandle == NULL || desc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    rc = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, 1,
                     &bytes);
    return rc != CUDA_SUCCESS ? rc : array_create((struct CUarray_st **)pHandle, bytes);
}

GWSIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    return array_destroy(hArray);
}

GWSIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                             const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                             unsigned int numMipmapLevels)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes;
    if (pHandle == NULL || desc == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    rc = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels,
                     numMipmapLevels, &bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUarray_st *a;
    rc = array_create(&a, bytes);
    if (rc == CUDA_SUCCESS)
        *pHandle = (CUmipmappedArray)(void *)a;
    return rc;
}

GWSIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    return array_destroy((struct CUarray_st *)(void *)hMipmappedArray);
}
