/* The GPU-time measurements of the launch gate (see measure.h). */
#include "measure.h"

#include <stdint.h>

#include "compute.h"
#include "compute_state.h"
#include "limiter.h"
#include "real.h"

#define RING VGPU_CS_RING
#define POOL VGPU_CS_POOL
#define LONG_CALL_NS 200000ull /* a launch call this long did more than launch (a launch: 3-5 us
                                * on the H200; a lazy module load: 0.5-2.6 ms) */

void vgpu_capture_relax(struct vgpu_capture_mode *m)
{
    if (m->relaxed || vgpu_cs.exchange_mode == NULL)
        return;
    m->mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    m->relaxed = vgpu_cs.exchange_mode(&m->mode) == CUDA_SUCCESS;
}

void vgpu_capture_restore(struct vgpu_capture_mode *m)
{
    if (m->relaxed)
        (void)vgpu_cs.exchange_mode(&m->mode);
}

static CUevent pool_get(struct vgpu_cdev *c, CUcontext ctx)
{
    CUevent e = NULL;
    if (c->pool_ctx != ctx) { /* another context: the old events are not usable there */
        c->npool = 0;
        c->pool_ctx = ctx;
    }
    if (c->npool > 0)
        return c->pool[--c->npool];
    if (vgpu_cu.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        return NULL;
    return e;
}

static void pool_put(struct vgpu_cdev *c, CUevent e)
{
    if (e == NULL)
        return;
    if (c->npool < POOL)
        c->pool[c->npool++] = e;
    else
        (void)vgpu_cu.cuEventDestroy_v2(e);
}

/* The clock a measured launch ran at: the highest of the clock thread's readings from the one
 * before its launch on (0: none known).  The highest, because the estimate is the smallest of
 * several samples brought to f_sat: a sample given too high a clock is charged more and left
 * out of the smallest; one given too low a clock would be picked and under-charge. */
static uint32_t clock_tag(const struct vgpu_cdev *c, uint64_t launched)
{
    uint32_t n = __atomic_load_n(&c->nclocks, __ATOMIC_ACQUIRE), i, tag = 0;
    uint64_t from = launched / 1000000u;

    for (i = 0; i < VGPU_CS_CLOCKS && i < n; i++) {
        uint64_t r = LD(&c->clocks[(n - 1u - i) % VGPU_CS_CLOCKS]);
        uint32_t mhz = (uint32_t)(r & 0xffffu);
        tag = mhz > tag ? mhz : tag;
        if ((r >> 16) <= from) /* the reading before the launch: the clock it started at */
            break;
    }
    return tag;
}

/* A signature's first measurement whose launch call ran long (LONG_CALL_NS): with CUDA's lazy
 * module loading (the default) a kernel's first launch loads its module inside the call, for
 * 0.5-2.6 ms on the H200 with PyTorch's and cuBLAS's kernels, while the GPU waits behind the
 * start event.  Such a sample is the loading, not the kernel: as a cost sample it was the
 * signature's estimate until the next one came back, and it settled the launch's provisional
 * charge at the loading's time (a model paced at 30 % with 16 kernels loaded lazily ran its
 * first second at half its speed on the simulated GPU).  It is dropped: the provisional charge
 * stands and the next measurement of the signature counts.  Only while the signature has no
 * sample: its later launches load nothing, and a paced process's launch calls hardly ever wait
 * (the queue bound keeps the driver's queue short), so no signature stays unmeasured for long. */
static int loaded_in_the_call(const struct vgpu_cpend *p)
{
    int known = 0;

    if (p->cpu_ns < LONG_CALL_NS)
        return 0;
    (void)lim_cost_estimate(&vgpu_cs.costs, p->key, &known, NULL);
    return known == 0;
}

/* The oldest measured launch `p` is not done: when it is past its estimated end (its `due`,
 * moved on by what the horizon was moved since it was taken), everything queued after it ends
 * that much later than estimated too, so the busy horizon moves on by as much.  Estimates fall
 * short of a long queue's real time: each is the smallest of the last 16 samples, which sits
 * under their mean wherever kernel times vary (a GPU at its power cap moves its clock by the
 * ms), and the horizon adds them up for as long as the queue never drains.  A loop that never
 * synchronises then overran its turn's window by what it under-estimated over the window, and
 * a 30 % neighbour synchronising after each launch lost that much of its own window (the
 * simulated GPU with kernel times varying by up to 20 %: 86-88 % of its due, 98-103 % with
 * none; the H200's newcomer beside a never-synchronising loop: 21-23 % of the GPU for ~28
 * due).  Under c->lock. */
static void running_late(struct vgpu_cdev *c, const struct vgpu_cpend *p)
{
    uint64_t now = vgpu_compute_now(), due = p->due + (c->behind - p->behind);

    if (now <= due || LD(&c->stalled))
        return;
    c->behind += now - due;
    ADD(&c->horizon, now - due);
}

/* Takes finished measurements off the ring (oldest first), under c->lock. */
void vgpu_measure_poll_locked(struct vgpu_cdev *c)
{
    while (c->count > 0) {
        struct vgpu_cpend *p = &c->ring[c->head];
        CUresult q;
        float ms = 0.0f;

        if (__atomic_load_n(&p->mark, __ATOMIC_ACQUIRE) == UINT64_MAX)
            return; /* its launch is still under way (leave() not reached yet) */
        q = vgpu_cu.cuEventQuery(p->end);
        if (q == CUDA_ERROR_NOT_READY) {
            running_late(c, p);
            return;
        }
        if (q == CUDA_SUCCESS && p->key != 0 && !loaded_in_the_call(p) &&
            vgpu_cu.cuEventElapsedTime(&ms, p->start, p->end) == CUDA_SUCCESS && ms >= 0.0f) {
            uint64_t ns = (uint64_t)((double)ms * 1e6);
            /* An idle stream: `start` fired before the kernel was even submitted; take off
             * the launch's CPU time, the smallest seen (a thread preempted after submitting
             * shows a long one, which would shrink the sample; the smallest of 16 samples
             * then took it: 42 % at a 10 % limit on the sim) */
            if (!p->chained) {
                uint64_t m = c->min_cpu_ns;
                c->min_cpu_ns = m = m == 0 || p->cpu_ns < m ? p->cpu_ns : m + m / 256u;
                ns = ns > m + ns / 8u ? ns - m : ns - ns / 8u;
            }
            lim_cost_sample(&vgpu_cs.costs, p->key, ns, clock_tag(c, p->launched),
                            LD(&c->ref_mhz));
            if (p->provisional_pct != 0) {
                /* charged the running mean at launch: pay (or get back) the difference from
                 * what its signature is estimated at now.  charged_ns, which the busy feedback
                 * holds against NVML, gets what the launch added short (the first launches of a
                 * process add 0: a model's first 4 kernels of 100 ms ran 400 ms that the first
                 * feedback window read as "busier than charged", 2x, on the simulated GPU) */
                int known = 0;
                uint64_t raw = 0;
                uint64_t est = lim_cost_estimate(&vgpu_cs.costs, p->key, &known, &raw);
                if (known) {
                    lim_pacer_settle(&c->blk->tat_ns, p->provisional_ns,
                                     lim_scale_cost(est, LD(&c->scale_ppm)), p->provisional_pct);
                    if (raw > p->provisional_raw)
                        ADD(&c->blk->charged_ns, raw - p->provisional_raw);
                }
            }
        }
        if (p->unknown)
            ST(&c->unknown_in_flight, c->unknown_in_flight - 1u);
        if (LD(&c->stalled)) /* the GPU made progress (read first: a store per poll dirties the
                              * line the gate reads on every launch) */
            ST(&c->stalled, 0u);
        if (p->mark > LD(&c->completed)) {
            ST(&c->completed, p->mark);
            ST(&c->completed_at, vgpu_compute_now());
        }
        pool_put(c, p->start);
        pool_put(c, p->end);
        p->live = 0;
        c->head = (c->head + 1) % RING;
        ST(&c->count, c->count - 1);
        ST(&c->poll_due, c->count > 0 ? c->ring[c->head].due : 0);
    }
}

void vgpu_measure_poll(struct vgpu_cdev *c, struct vgpu_capture_mode *m)
{
    vgpu_capture_relax(m);
    vgpu_cs_lock(&c->lock);
    vgpu_measure_poll_locked(c);
    vgpu_cs_unlock(&c->lock);
}

/* Ring slot `i` (p) now measures this launch of `key`: its charge, provisional or not, its
 * estimated end and the queue bound's bookkeeping; under c->lock. */
static void claim(struct vgpu_cdev *c, struct vgpu_cpend *p, struct vgpu_gate *g, uint64_t key,
                  uint32_t i)
{
    p->key = key;
    p->launched = vgpu_compute_now();
    p->provisional_ns = g->provisional_ns;
    p->provisional_pct = g->provisional_pct;
    p->provisional_raw = g->provisional_raw;
    p->unknown = g->unknown;
    if (p->unknown)
        ST(&c->unknown_in_flight, c->unknown_in_flight + 1u);
    p->due = LD(&c->horizon);
    p->behind = c->behind;
    ST(&c->sampled_at, LD(&c->submitted));
    g->sample = (int)i;
}

void vgpu_measure_start(struct vgpu_cdev *c, struct vgpu_gate *g, uint64_t key, CUstream stream,
                        struct vgpu_capture_mode *m)
{
    CUcontext ctx = NULL;

    vgpu_capture_relax(m);
    if (vgpu_cu.cuCtxGetCurrent == NULL || vgpu_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
        ctx == NULL)
        return;
    vgpu_cs_lock(&c->lock);
    if (c->count < RING) {
        uint32_t i = (c->head + c->count) % RING;
        struct vgpu_cpend *p = &c->ring[i];
        p->start = pool_get(c, ctx);
        p->end = pool_get(c, ctx);
        /* busy (or unknown): `start` fires when the work ahead ends, the sample is the kernel's
         * own; only an idle stream's sample has the launch's CPU time in it */
        p->chained = vgpu_cu.cuStreamQuery == NULL || vgpu_cu.cuStreamQuery(stream) != CUDA_SUCCESS;
        if (p->start != NULL && p->end != NULL &&
            vgpu_cu.cuEventRecord(p->start, stream) == CUDA_SUCCESS) {
            p->live = 1;
            claim(c, p, g, key, i);
            if (c->count == 0)
                ST(&c->poll_due, p->due);
            ST(&c->count, c->count + 1); /* reserved; filled in by leave() */
            p->mark = UINT64_MAX;
        } else {
            pool_put(c, p->start);
            pool_put(c, p->end);
        }
    } else if (RING > 1 && c->pool_ctx == ctx) {
        /* Full: the newest measurement moves to this launch, so that the newest work is
         * always measured (the queue bound and a high one's "still busy" read its end). */
        uint32_t i = (c->head + RING - 1u) % RING;
        struct vgpu_cpend *p = &c->ring[i];
        if (__atomic_load_n(&p->mark, __ATOMIC_ACQUIRE) != UINT64_MAX &&
            vgpu_cu.cuEventRecord(p->start, stream) == CUDA_SUCCESS) {
            p->chained = 1; /* a full ring: the stream has work ahead */
            /* the launch it moved from stays as charged */
            if (p->unknown)
                ST(&c->unknown_in_flight, c->unknown_in_flight - 1u);
            claim(c, p, g, key, i);
            __atomic_store_n(&p->mark, UINT64_MAX, __ATOMIC_RELEASE);
        }
    }
    vgpu_cs_unlock(&c->lock);
    g->t0 = vgpu_compute_now();
}

void vgpu_measure_end(struct vgpu_cdev *c, const struct vgpu_gate *g, CUstream stream,
                      CUresult rc, uint64_t mark)
{
    struct vgpu_cpend *p = &c->ring[g->sample];

    p->cpu_ns = vgpu_compute_now() - g->t0;
    vgpu_cs_lock(&c->lock);
    if (rc != CUDA_SUCCESS || vgpu_cu.cuEventRecord(p->end, stream) != CUDA_SUCCESS) {
        /* Nothing to measure: record the end right after the start so the slot completes. */
        p->key = 0;
        (void)vgpu_cu.cuEventRecord(p->end, stream);
    }
    __atomic_store_n(&p->mark, mark, __ATOMIC_RELEASE);
    vgpu_cs_unlock(&c->lock);
}
