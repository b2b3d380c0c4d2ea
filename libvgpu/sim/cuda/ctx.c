/* ctx.c - primary and created contexts, the per-thread context stack, synchronization. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cudasim.h"

#define GWSIM_STACK_DEPTH 32

static __thread struct CUctx_st *tl_stack[GWSIM_STACK_DEPTH];
static __thread int tl_depth;

struct CUctx_st *gwsim_current_ctx(void)
{
    return tl_depth > 0 ? tl_stack[tl_depth - 1] : NULL;
}

int gwsim_ctx_ok(const struct CUctx_st *ctx)
{
    return ctx != NULL && ctx->magic == GWSIM_M_CTX && ctx->alive;
}

/* Is this a context handle we gave out (alive or not)? */
static int ctx_known(const struct CUctx_st *ctx)
{
    return ctx >= &g_sim.ctx[0] && ctx < &g_sim.ctx[GWSIM_MAX_CTX] && ctx->magic == GWSIM_M_CTX;
}

CUresult gwsim_require_ctx(struct CUctx_st **out)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUctx_st *ctx = gwsim_current_ctx();
    if (!gwsim_ctx_ok(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

static void init_null_stream(struct CUctx_st *ctx)
{
    memset(&ctx->null_stream, 0, sizeof ctx->null_stream);
    ctx->null_stream.magic = GWSIM_M_STREAM;
    ctx->null_stream.alive = 1;
    ctx->null_stream.ctx = ctx;
}

/* GPUWARDEN_SIM_CTX_CREATE_MS: how long creating a first context takes after the process is
 * already visible in NVML (a real driver takes 100 ms and more, longer under load); 0 by
 * default.  Read once per process; context creation is not a hot path. */
static long ctx_create_ms(void)
{
    static long ms = -1;
    if (ms < 0) {
        const char *v = getenv("GPUWARDEN_SIM_CTX_CREATE_MS");
        char *end = NULL;
        long n = v != NULL && *v != '\0' ? strtol(v, &end, 10) : 0;
        if (v != NULL && *v != '\0' && (*end != '\0' || n < 0 || n > 60000)) {
            gwsim_error("GPUWARDEN_SIM_CTX_CREATE_MS=\"%s\" is not valid: use milliseconds "
                        "from 0 to 60000; using 0", v);
            n = 0;
        }
        ms = n;
    }
    return ms;
}

/* A context came alive: the first one of this process on a device costs the context overhead,
 * and makes the process visible in NVML there, like a real CUDA context. */
void gwsim_ctx_activate(struct CUctx_st *ctx)
{
    ctx->alive = 1;
    memset(&ctx->last, 0, sizeof ctx->last);
    init_null_stream(ctx);
    unsigned d = (unsigned)ctx->device;
    if (g_sim.dev_ctx_count[d]++ == 0) {
        struct gwsim_state *st = gwsim_state();
        struct gwsim_proc *self = gwsim_self();
        if (self != NULL) {
            /* The overhead is charged even past the device's size, as a real driver can. */
            __atomic_fetch_add(&st->dev[d].used_bytes, st->ctx_overhead, __ATOMIC_ACQ_REL);
            __atomic_fetch_add(&self->used[d], st->ctx_overhead, __ATOMIC_ACQ_REL);
            __atomic_store_n(&self->has_ctx[d], 1, __ATOMIC_RELEASE);
        }
        long ms = ctx_create_ms();
        if (ms > 0) {
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

void gwsim_ctx_deactivate(struct CUctx_st *ctx)
{
    gwsim_free_ctx_memory(ctx);
    ctx->alive = 0;
    ctx->null_stream.alive = 0;
    unsigned d = (unsigned)ctx->device;
    if (--g_sim.dev_ctx_count[d] == 0) {
        struct gwsim_state *st = gwsim_state();
        struct gwsim_proc *self = gwsim_self();
        if (self != NULL) {
            __atomic_store_n(&self->has_ctx[d], 0, __ATOMIC_RELEASE);
            gwsim_uncharge(d, st->ctx_overhead);
        }
    }
}

static void stack_remove(const struct CUctx_st *ctx)
{
    int w = 0;
    for (int r = 0; r < tl_depth; r++)
        if (tl_stack[r] != ctx)
            tl_stack[w++] = tl_stack[r];
    tl_depth = w;
}

/* ---- primary contexts -------------------------------------------------------------------- */
GWSIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    if (gwsim_self() == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_sim.lock);
    struct CUctx_st *ctx = &g_sim.ctx[dev];
    ctx->magic = GWSIM_M_CTX;
    ctx->device = dev;
    ctx->primary = 1;
    if (ctx->refcount++ == 0 && !ctx->alive)
        gwsim_ctx_activate(ctx);
    pthread_mutex_unlock(&g_sim.lock);
    *pctx = ctx;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct CUctx_st *ctx = &g_sim.ctx[dev];
    if (ctx->refcount == 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--ctx->refcount == 0 && ctx->alive) {
        gwsim_ctx_deactivate(ctx);
    }
    pthread_mutex_unlock(&g_sim.lock);
    return rc;
}

GWSIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct CUctx_st *ctx = &g_sim.ctx[dev];
    if (ctx->alive) { /* all its allocations and state go; it is reborn on the next retain */
        gwsim_ctx_deactivate(ctx);
        if (ctx->refcount > 0)
            gwsim_ctx_activate(ctx);
    }
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    *flags = g_sim.ctx[dev].flags;
    *active = g_sim.ctx[dev].alive;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

/* ---- created contexts -------------------------------------------------------------------- */
GWSIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pctx == NULL || flags > 0x1f)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = gwsim_resolve_device(&dev)) != CUDA_SUCCESS)
        return rc;
    if (gwsim_self() == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (tl_depth == GWSIM_STACK_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    struct CUctx_st *ctx = NULL;
    for (unsigned i = GWSIM_MAX_DEVICES; i < GWSIM_MAX_CTX && ctx == NULL; i++)
        if (!g_sim.ctx[i].alive)
            ctx = &g_sim.ctx[i];
    if (ctx != NULL) {
        ctx->magic = GWSIM_M_CTX;
        ctx->device = dev;
        ctx->primary = 0;
        ctx->flags = flags;
        gwsim_ctx_activate(ctx);
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (ctx == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tl_stack[tl_depth++] = ctx; /* a new context is made current, as with the real driver */
    *pctx = ctx;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx_known(ctx) || !ctx->alive || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_sim.lock);
    gwsim_ctx_deactivate(ctx);
    pthread_mutex_unlock(&g_sim.lock);
    stack_remove(ctx);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ctx == NULL) { /* pops the top, or nothing on an empty stack */
        if (tl_depth > 0)
            tl_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_known(ctx) || !ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_depth == 0)
        tl_depth = 1;
    tl_stack[tl_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = gwsim_current_ctx();
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *device = gwsim_ordinal_of(ctx->device);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!ctx_known(ctx) || !ctx->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_depth == GWSIM_STACK_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    tl_stack[tl_depth++] = ctx;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (tl_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *top = tl_stack[--tl_depth];
    if (pctx != NULL)
        *pctx = top;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxSynchronize(void)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_ticket last = ctx->last;
    pthread_mutex_unlock(&g_sim.lock);
    gwsim_sync_ticket(ctx->device, &last);
    pthread_mutex_lock(&g_sim.lock);
    gwsim_trim_pools(ctx->device);
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}
