/* exec.c - streams, events, modules, kernel launches and graphs on the simulated timeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cudasim.h"

static int is_default_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The stream a call means: a created one, or the current context's default stream. */
static CUresult resolve_stream(CUstream s, struct CUstream_st **out)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (is_default_stream(s)) {
        struct CUctx_st *ctx;
        if ((rc = gwsim_require_ctx(&ctx)) != CUDA_SUCCESS)
            return rc;
        *out = &ctx->null_stream;
        return CUDA_SUCCESS;
    }
    if (s->magic != GWSIM_M_STREAM || !s->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gwsim_ctx_ok(s->ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = s;
    return CUDA_SUCCESS;
}

/* The end of everything queued on a stream, and pools trimmed as at any sync point. */
static void sync_until(struct gwsim_ticket *last, int device)
{
    gwsim_sync_ticket(device, last);
    pthread_mutex_lock(&g_sim.lock);
    gwsim_trim_pools(device);
    pthread_mutex_unlock(&g_sim.lock);
}

/* ---- streams ------------------------------------------------------------------------------ */
GWSIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
                                                 int priority)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (phStream == NULL || flags > CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->magic = GWSIM_M_STREAM;
    s->alive = 1;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority; /* clamped like the driver */
    *phStream = s;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cuStreamCreateWithPriority(phStream, Flags, 0);
}

GWSIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (is_default_stream(hStream) || hStream->magic != GWSIM_M_STREAM || !hStream->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    hStream->alive = 0; /* queued work still completes on the device's timeline */
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult rc = resolve_stream(hStream, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    gwsim_call_cost(GWSIM_CALL_QUERY);
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_ticket last = s->last;
    pthread_mutex_unlock(&g_sim.lock);
    sync_until(&last, s->ctx->device);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult rc = resolve_stream(hStream, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    gwsim_call_cost(GWSIM_CALL_QUERY);
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_ticket last = s->last;
    pthread_mutex_unlock(&g_sim.lock);
    return gwsim_ticket_done((unsigned)s->ctx->device, &last) ? CUDA_SUCCESS
                                                               : CUDA_ERROR_NOT_READY;
}

/* ---- events ------------------------------------------------------------------------------- */
GWSIM_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (phEvent == NULL || Flags > 0x7)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = GWSIM_M_EVENT;
    e->alive = 1;
    e->flags = Flags;
    *phEvent = e;
    return CUDA_SUCCESS;
}

static int event_ok(const struct CUevent_st *e)
{
    return e != NULL && e->magic == GWSIM_M_EVENT && e->alive;
}

static struct gwsim_ticket event_tail(const struct CUevent_st *e)
{
    pthread_mutex_lock(&g_sim.lock);
    struct gwsim_ticket tail = e->tail;
    pthread_mutex_unlock(&g_sim.lock);
    return tail;
}

/* The end of an event's tail, once looked up, is kept (unless it was recorded again since). */
static void event_keep_end(struct CUevent_st *e, const struct gwsim_ticket *tail)
{
    pthread_mutex_lock(&g_sim.lock);
    if (e->tail.n == tail->n && e->tail.pos == tail->pos)
        e->tail.end_ns = tail->end_ns;
    pthread_mutex_unlock(&g_sim.lock);
}

/* Whether a recorded event has completed: its stream's tail then has ended. */
static int event_done(struct CUevent_st *e)
{
    struct gwsim_ticket tail = event_tail(e);
    int done = gwsim_ticket_done((unsigned)e->device, &tail);
    if (done)
        event_keep_end(e, &tail);
    return done;
}

/* When a completed event completed: its tail's end, or its recording if that came later. */
static uint64_t event_time(const struct CUevent_st *e)
{
    return e->tail.end_ns > e->recorded_ns ? e->tail.end_ns : e->recorded_ns;
}

GWSIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s;
    if ((rc = resolve_stream(hStream, &s)) != CUDA_SUCCESS)
        return rc;
    gwsim_call_cost(GWSIM_CALL_RECORD);
    uint64_t now = gwsim_now_ns();
    pthread_mutex_lock(&g_sim.lock);
    hEvent->recorded_ns = now;
    hEvent->tail = s->last; /* the stream's tail */
    hEvent->device = s->ctx->device;
    hEvent->recorded = 1;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    gwsim_call_cost(GWSIM_CALL_QUERY);
    if (!hEvent->recorded)
        return CUDA_SUCCESS; /* nothing to wait for, as with the real driver */
    return event_done(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GWSIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    if (hEvent->recorded) {
        struct CUctx_st *ctx = gwsim_current_ctx();
        struct gwsim_ticket tail = event_tail(hEvent);
        gwsim_sync_ticket(hEvent->device, &tail);
        event_keep_end(hEvent, &tail);
        if (gwsim_ctx_ok(ctx)) {
            pthread_mutex_lock(&g_sim.lock);
            gwsim_trim_pools(ctx->device);
            pthread_mutex_unlock(&g_sim.lock);
        }
    }
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pMilliseconds == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_ok(hStart) || !event_ok(hEnd) || !hStart->recorded || !hEnd->recorded ||
        (hStart->flags & CU_EVENT_DISABLE_TIMING) || (hEnd->flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_done(hStart) || !event_done(hEnd))
        return CUDA_ERROR_NOT_READY;
    double ms = ((double)event_time(hEnd) - (double)event_time(hStart)) / 1e6;
    *pMilliseconds = (float)ms;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

GWSIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    hEvent->alive = 0;
    return CUDA_SUCCESS;
}

/* ---- modules ------------------------------------------------------------------------------ */
GWSIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    struct CUctx_st *ctx;
    CUresult rc = gwsim_require_ctx(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (module == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->magic = GWSIM_M_MODULE;
    m->alive = 1;
    *module = m; /* no device code runs here: any image is accepted */
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (hmod == NULL || hmod->magic != GWSIM_M_MODULE || !hmod->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    hmod->alive = 0;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (hfunc == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (hmod == NULL || hmod->magic != GWSIM_M_MODULE || !hmod->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUfunc_st *f = calloc(1, sizeof *f);
    if (f == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    f->magic = GWSIM_M_FUNC;
    snprintf(f->name, sizeof f->name, "%s", name);
    *hfunc = f;
    return CUDA_SUCCESS;
}

/* ---- launches ----------------------------------------------------------------------------- */
static CUresult check_dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz)
{
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (gx > 2147483647u || gy > 65535u || gz > 65535u || bx > 1024u || by > 1024u || bz > 64u ||
        (uint64_t)bx * by * bz > 1024u)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A draw from [0, 1) for GPUWARDEN_SIM_JITTER (lock held): xorshift64*, seeded from the pid
 * and the clock on first use, so that processes draw apart. */
static double jitter_draw(void)
{
    uint64_t x = g_sim.jitter_rng;
    if (x == 0)
        x = ((uint64_t)getpid() << 32) ^ gwsim_now_ns() ^ 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g_sim.jitter_rng = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0; /* 2^53 */
}

/* Queue one simulated kernel of gx*gy*gz microseconds (times the scale; longer while DVFS
 * holds the clock below its highest, simstate.h) on a stream.  Returns
 * at once, unless the stream already holds GWSIM_QUEUE_DEPTH unfinished kernels. */
static void push_kernel(struct CUstream_st *s, unsigned gx, unsigned gy, unsigned gz)
{
    double us = (double)gx * (double)gy * (double)gz * g_sim.kernel_scale;
    const struct gwsim_dvfs_params *dvfs = gwsim_dvfs_params();
    uint32_t mhz = 0;
    if (dvfs->max_mhz != 0) { /* DVFS: nominal at the highest clock, slower below it */
        mhz = gwsim_dvfs_clock((unsigned)s->ctx->device, gwsim_now_ns(), NULL);
        us *= pow((double)dvfs->max_mhz / mhz, dvfs->exponent);
    }
    unsigned dev = (unsigned)s->ctx->device;
    struct gwsim_ticket oldest = {0};
    pthread_mutex_lock(&g_sim.lock);
    if (g_sim.jitter > 0.0)
        us *= 1.0 + g_sim.jitter * jitter_draw();
    uint64_t ns = (uint64_t)(us * 1000.0);
    if (s->queued >= GWSIM_QUEUE_DEPTH)
        oldest = s->ends[s->queued % GWSIM_QUEUE_DEPTH];
    pthread_mutex_unlock(&g_sim.lock);
    gwsim_ticket_wait(dev, &oldest, 0); /* the queue is full: wait for a slot, like the driver */
    struct gwsim_ticket t = gwsim_timeline_push(dev, ns, mhz);
    pthread_mutex_lock(&g_sim.lock);
    s->ends[s->queued % GWSIM_QUEUE_DEPTH] = t;
    s->queued++;
    s->last = t; /* a process's kernels end in the order it queued them */
    s->ctx->last = t;
    unsigned nth = ++g_sim.launches;
    pthread_mutex_unlock(&g_sim.lock);
    if (g_sim.stall_every != 0 && nth % g_sim.stall_every == 0)
        gwsim_sleep_until(gwsim_now_ns() + (uint64_t)g_sim.stall_us * 1000u);
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream hStream, void **kernelParams,
                       void **extra)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s;
    if ((rc = resolve_stream(hStream, &s)) != CUDA_SUCCESS)
        return rc;
    if (f == NULL || f->magic != GWSIM_M_FUNC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (kernelParams != NULL && extra != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_dims(gx, gy, gz, bx, by, bz)) != CUDA_SUCCESS)
        return rc;
    gwsim_call_cost(GWSIM_CALL_LAUNCH);
    if (g_sim.lazy_load_us != 0 && !__atomic_exchange_n(&f->loaded, 1, __ATOMIC_ACQ_REL)) {
        /* modules differ in size: the k-th function loaded takes (1 + k % 4) times as long */
        unsigned k = __atomic_fetch_add(&g_sim.lazy_loads, 1u, __ATOMIC_RELAXED);
        gwsim_sleep_until(gwsim_now_ns() + (uint64_t)g_sim.lazy_load_us * 1000u * (1u + k % 4u));
    }
    push_kernel(s, gx, gy, gz);
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                  kernelParams, extra);
}

GWSIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                          unsigned int gridDimY, unsigned int gridDimZ,
                                          unsigned int blockDimX, unsigned int blockDimY,
                                          unsigned int blockDimZ, unsigned int sharedMemBytes,
                                          CUstream hStream, void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                  kernelParams, extra);
}

GWSIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                unsigned int gridDimY, unsigned int gridDimZ,
                                                unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void **kernelParams)
{
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream,
                  kernelParams, NULL);
}

GWSIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                       void **kernelParams, void **extra)
{
    if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL))
        return gwsim_check_init() != CUDA_SUCCESS ? CUDA_ERROR_NOT_INITIALIZED
                                                   : CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                  config->blockDimY, config->blockDimZ, config->hStream, kernelParams, extra);
}

GWSIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                            void **kernelParams, void **extra)
{
    return cuLaunchKernelEx(config, f, kernelParams, extra);
}

/* ---- graphs: a list of kernel nodes run in order ------------------------------------------ */
GWSIM_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (phGraph == NULL || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GWSIM_M_GRAPH;
    g->alive = 1;
    *phGraph = g;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies,
                                              size_t numDependencies,
                                              const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (phGraphNode == NULL || nodeParams == NULL || (numDependencies > 0 && dependencies == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    if (hGraph == NULL || hGraph->magic != GWSIM_M_GRAPH || !hGraph->alive)
        return CUDA_ERROR_INVALID_VALUE;
    if ((nodeParams->func == NULL || nodeParams->func->magic != GWSIM_M_FUNC) &&
        nodeParams->kern == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = check_dims(nodeParams->gridDimX, nodeParams->gridDimY, nodeParams->gridDimZ,
                         nodeParams->blockDimX, nodeParams->blockDimY, nodeParams->blockDimZ)) !=
        CUDA_SUCCESS)
        return rc;
    if (hGraph->n == hGraph->cap) {
        unsigned cap = hGraph->cap ? hGraph->cap * 2 : 16;
        struct gwsim_node *t = realloc(hGraph->nodes, cap * sizeof *t);
        if (t == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        hGraph->nodes = t;
        hGraph->cap = cap;
    }
    struct gwsim_node *n = &hGraph->nodes[hGraph->n];
    n->grid[0] = nodeParams->gridDimX;
    n->grid[1] = nodeParams->gridDimY;
    n->grid[2] = nodeParams->gridDimZ;
    struct CUgraphNode_st *node = calloc(1, sizeof *node);
    if (node == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    node->index = hGraph->n++;
    *phGraphNode = node;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (hGraph == NULL || hGraph->magic != GWSIM_M_GRAPH || !hGraph->alive)
        return CUDA_ERROR_INVALID_VALUE;
    hGraph->alive = 0;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  unsigned long long flags)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    (void)flags;
    if (phGraphExec == NULL || hGraph == NULL || hGraph->magic != GWSIM_M_GRAPH || !hGraph->alive)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (x == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->nodes = calloc(hGraph->n ? hGraph->n : 1, sizeof *x->nodes);
    if (x->nodes == NULL) {
        free(x);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (hGraph->n)
        memcpy(x->nodes, hGraph->nodes, hGraph->n * sizeof *x->nodes);
    x->n = hGraph->n;
    x->magic = GWSIM_M_GEXEC;
    x->alive = 1;
    *phGraphExec = x;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (hGraphExec == NULL || hGraphExec->magic != GWSIM_M_GEXEC || !hGraphExec->alive)
        return CUDA_ERROR_INVALID_VALUE;
    hGraphExec->alive = 0;
    return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CUresult rc = gwsim_check_init();
    if (rc != CUDA_SUCCESS)
        return rc;
    if (hGraphExec == NULL || hGraphExec->magic != GWSIM_M_GEXEC || !hGraphExec->alive)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    if ((rc = resolve_stream(hStream, &s)) != CUDA_SUCCESS)
        return rc;
    gwsim_call_cost(GWSIM_CALL_LAUNCH);
    for (unsigned i = 0; i < hGraphExec->n; i++)
        push_kernel(s, hGraphExec->nodes[i].grid[0], hGraphExec->nodes[i].grid[1],
                    hGraphExec->nodes[i].grid[2]);
    return CUDA_SUCCESS;
}
