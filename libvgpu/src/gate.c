/* The launch gate proper (see gate.h, limiter.h and docs/compute.md). */
#include "gate.h"

#include <stdint.h>

#include "compute.h"
#include "compute_state.h"
#include "limiter.h"
#include "log.h"
#include "measure.h"
#include "node.h"
#include "pressure.h"
#include "ticker.h"
#include "vgpu_compute.h"

/* ---- tunables (docs/compute.md explains each) ---------------------------------------------- */
#define TOLERANCE_NS   2000000ull  /* pacer burst: the most GPU-time credit, in wall time */
#define TOLERANCE_SHARED_NS 20000000ull /* ... on a shared GPU, where launches go in bursts */
#define QUEUE_NS       2000000ull  /* estimated work a process may have queued ahead */
#define ALONE_QUEUE_NS 100000000ull /* ... a low one with gpucores while alone and not paced: a
                                    * newcomer waits behind no more than this (a loop that never
                                    * synchronises queued ~11 s of 10-ms kernels otherwise); deep
                                    * enough that the host's own work between steps still
                                    * overlaps the GPU's */
#define SLEEP_CHUNK_NS 2000000ull  /* waits re-check yield/limit this often */
#define CLAIM_CHUNK_NS 500000ull   /* a low waiting out a high one's claim re-reads it this often:
                                    * the high one's ticker may cut it short (ticker.c, watch) */
#define CLAIM_CHUNK_LIGHT_NS 100000ull /* ... a light one's, which its ticker watches every
                                    * 0.1 ms: a request service's claims cost a busy neighbour
                                    * ~a quarter of the longer chunk each, hundreds a second */
#define SAMPLE_EVERY   32u         /* measure one launch in this many, once a cost is known: a
                                    * measurement costs two cuEventRecord (~1.1 us each on the
                                    * H200), which a launch-bound application pays */
#define HORIZON_UNKNOWN_NS 1000000ull /* busy horizon of a launch whose cost is not known yet */
#define PROVISIONAL_MAX 4u         /* launches of unknown cost under a queue bound measured and
                                    * not read yet: one more waits for them (a few: a paced one's
                                    * settlement pays for them, and a workload of changing shapes
                                    * keeps launching kernels of unknown cost, most of them
                                    * short) */
#define GPU_WAIT_MAX_NS 1000000000ull /* the longest a launch waits for measured work to finish:
                                    * work that waits for the host (a stream waiting on a value
                                    * this thread writes after its next launch) would never */
#define YOUNG_SAMPLES  4u          /* a signature is measured on every launch until it has this
                                    * many samples: its first launch may have loaded its module
                                    * inside the call (CUDA's lazy loading, ms), which is no
                                    * measure of the kernel */

_Static_assert(SAMPLE_EVERY == 2u * LIM_SAMPLE_GAP_MIN, "lim_sample_due: a gap of ~SAMPLE_EVERY");

/* One step of a wait for the device's measured work, begun at `from`: sleeps 100 us and polls
 * the measurements.  Returns 0 (and marks the device stalled: no launch waits for measured work
 * again until one completes) once the wait has lasted GPU_WAIT_MAX_NS, so that a launch never
 * hangs on work that cannot finish before it. */
static int await_measured(struct vgpu_cdev *c, uint64_t from, struct vgpu_capture_mode *m)
{
    uint64_t now = vgpu_compute_now();

    if (now - from >= GPU_WAIT_MAX_NS) {
        ST(&c->stalled, 1u);
        vgpu_log(VGPU_LOG_INFO, "compute: measured work not finished %llu ms after a launch "
                 "began waiting for it; launches go on without waiting until it does",
                 (unsigned long long)(GPU_WAIT_MAX_NS / 1000000u));
        return 0;
    }
    vgpu_cs_sleep_until(now + 100000u);
    vgpu_measure_poll_due(c, 0, 1, m);
    return 1;
}

/* The work a launch of estimated cost `est` queues, as neighbours and the low queue see it: a
 * launch of unknown cost counts as HORIZON_UNKNOWN_NS at least (its charge, the running mean,
 * may be 0). */
static uint64_t queued_work(uint64_t est, int known)
{
    return known || est > HORIZON_UNKNOWN_NS ? est : HORIZON_UNKNOWN_NS;
}

/* The estimated work this process has ahead of the GPU, as the queue bound `bound` counts it:
 * what is outstanding (launched, not seen complete), less what the oldest measured launch in
 * flight has run of it beyond `bound`.  A kernel longer than the bound is then not waited out to
 * its end before the next launch goes: that left the GPU idle while the waiting thread woke
 * (paced 3-ms kernels at 70 % got 0.63-0.68).  It runs from when the work before it was seen
 * complete (no earlier than its start), or from its launch, whichever is later; the launch
 * precedes the start, by more when it waited behind a neighbour's work, so the credit can run
 * ahead of the GPU there.  Either way at most one launch queues behind a long one: the credit
 * never exceeds the oldest's own part beyond the bound.  Kernels no longer than the bound get
 * none.  Under c->lock (the ring's head). */
static uint64_t queue_ahead(struct vgpu_cdev *c, uint64_t now, uint64_t bound)
{
    uint64_t done, out, credit = 0;

    vgpu_cs_lock(&c->lock);
    done = LD(&c->completed);
    out = LD(&c->submitted) - done;
    if (c->count > 0) {
        const struct vgpu_cpend *p = &c->ring[c->head];
        uint64_t mark = __atomic_load_n(&p->mark, __ATOMIC_ACQUIRE);
        uint64_t from = LD(&c->completed_at) > p->launched ? LD(&c->completed_at) : p->launched;
        if (mark != UINT64_MAX && mark > done && mark - done > bound && now > from) {
            credit = mark - done - bound;
            credit = now - from < credit ? now - from : credit;
        }
    }
    vgpu_cs_unlock(&c->lock);
    return out - (credit < out ? credit : out);
}

/* lim_sample_due over the device's count of known launches (threads racing here may both
 * measure: harmless). */
static int sample_due(struct vgpu_cdev *c)
{
    uint64_t next = LD(&c->next_sample);

    if (!lim_sample_due(ADD(&c->nlaunch, 1u), &next))
        return 0;
    ST(&c->next_sample, next);
    return 1;
}

static _Thread_local struct vgpu_cdev *t_marks; /* the device whose wait_mark this thread keeps */

/* Each step of a wait in the gate (for its turn, its pace, a claim, its queue bound, measured
 * work) counts as activity, as a launch does: the ticker publishes the process as active on its
 * GPU (node slot), and a newcomer held ~50 ms in its pace, read as idle, broke its turns (sim,
 * stop 56). */
static inline void touch_waiting(void)
{
    __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
}

/* Starts counting a wait at `now` (its mark for credit_wait).  The first thread to wait on the
 * device also publishes its mark as the device's wait in progress, which the ticker counts up to
 * its tick (ticker.c, follow_use): a wait step's time reaches waited_ns only at the step's end
 * (up to SLEEP_CHUNK_NS later), and a tick that ended in the middle of one looked idle for the
 * rest of it while the next one, waited through, was left out (simulated GPU: a busy 30 % member
 * of the turns read 55 % idle and was found light). */
static uint64_t wait_begin(struct vgpu_cdev *c, uint64_t now)
{
    uint64_t none = 0;

    if (t_marks == NULL &&
        __atomic_compare_exchange_n(&c->wait_mark, &none, now, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        t_marks = c;
    return now;
}

/* Counts the time waited since *mark in waited_ns and moves *mark (and the device's wait in
 * progress, when this thread keeps it) to now.  Waits call it after each step, not once at their
 * end, so that the ticker sees waiting as it goes: a 28-ms wait for a turn counted at its end
 * left the ticks during it looking idle (limiter.h, light). */
static void credit_wait(struct vgpu_cdev *c, uint64_t *mark)
{
    uint64_t t = vgpu_compute_now();

    if (t <= *mark)
        return;
    ADD(&c->blk->waited_ns, t - *mark);
    if (vgpu_cs.proc != NULL)
        ADD(&vgpu_cs.proc->compute.waited_ns, t - *mark);
    if (t_marks == c)
        ST(&c->wait_mark, t);
    *mark = t;
}

/* credit_wait, and the wait is over. */
static void wait_end(struct vgpu_cdev *c, uint64_t *mark)
{
    credit_wait(c, mark);
    if (t_marks == c) {
        ST(&c->wait_mark, 0u);
        t_marks = NULL;
    }
}

/* A wait for a turn or a pace: asleep, or runnable and yielding the CPU (GPUWARDEN_GATE_WAIT
 * =yield, or =auto while the waiting thread itself waits for a CPU: pressure.c).  A thread that
 * sleeps between bursts looks light to the kernel's scheduler, which on a node with every core
 * busy puts it on a shared core, where it then launches in turns with the other task while the
 * GPU drains (H200, 16 cores spinning, 4096² matmuls paced at 70 %: 57.3-64.2 % asleep over
 * seven runs, 59.1-74.7 under `auto`, median 66.3 of five).  Yielding costs the CPU the wait
 * would have left idle. */
static void gate_wait_until(uint64_t t)
{
    if (vgpu_cs.gate_wait_cfg == LIM_WAIT_AUTO)
        vgpu_pressure_note_waiter();
    if (LD(&vgpu_cs.gate_wait) != LIM_WAIT_YIELD) {
        vgpu_cs_sleep_until(t);
        return;
    }
    while (vgpu_compute_now() < t)
        sched_yield();
}

/* Where the container's window is split among its processes (lim_split_wait, ticker.c): which
 * of the other parts' processes have nothing queued and wait for no part, by part. */
static uint32_t idle_parts(const struct vgpu_cdev *c, uint32_t n, uint64_t now)
{
    uint32_t idle = 0, i;

    for (i = 0; i < n && i < LIM_SPLIT_MAX; i++) {
        uint32_t slot = LD(&c->split_slot[i]);
        if (slot < VGPU_MAX_PROCS &&
            LD(&vgpu_cs.region.r->procs[slot].compute.busy_until_ns) <= now)
            idle |= 1u << i;
    }
    return idle;
}

/* This process's busy horizon `until` (UINT64_MAX: it waits for its part), where its siblings
 * read it (idle_parts), held a kernel longer (lim_split_busy_until). */
static void publish_busy(const struct vgpu_cdev *c, uint64_t until)
{
    if (LD(&c->split) > 1u && vgpu_cs.proc != NULL)
        ST(&vgpu_cs.proc->compute.busy_until_ns,
           until == UINT64_MAX ? until
                               : lim_split_busy_until(until, LD(&c->longest), LD(&c->gap)));
}

/* Waits for this container's turn (limiter.h), or for this process's part of it, to launch
 * `cost` ns of estimated work; returns the time after the wait.  Gives up when the turns, the
 * limit or the yield verdict change. */
static uint64_t wait_turn(struct vgpu_cdev *c, uint64_t cost, uint64_t from)
{
    uint64_t now = from, mark = 0; /* 0: not waiting (every launch in turns comes here) */

    for (;;) {
        uint64_t turn = LD(&c->turn), hz = LD(&c->horizon), w;
        struct lim_turn t = vgpu_turn_unpack(turn);
        uint32_t split = LD(&c->split);

        if (turn == 0 || LD(&c->limit) == 0 || LD(&c->yield))
            break;
        w = split > 1u ? lim_split_wait(t, LD(&c->split_rank), split, idle_parts(c, split, now),
                                        now, hz > now ? hz - now : 0, cost)
                       : lim_turn_wait(t, now, hz > now ? hz - now : 0, cost);
        if (w == 0)
            break;
        /* (from may be the launch's arrival, before a wait for its own queue: counted already) */
        if (mark == 0) {
            mark = wait_begin(c, vgpu_compute_now());
            publish_busy(c, UINT64_MAX); /* its part is wanted: no sibling runs work into it */
        }
        touch_waiting();
        gate_wait_until(now + (w > SLEEP_CHUNK_NS ? SLEEP_CHUNK_NS : w));
        credit_wait(c, &mark);
        now = vgpu_compute_now();
    }
    if (mark != 0) {
        wait_end(c, &mark);
        publish_busy(c, LD(&c->horizon));
    }
    return now;
}

/* Until when a launch of `cost` ns of estimated work must wait (0: it may go now): the agent
 * says yield, or a claiming high is busy (its slot's activity, published on each of its
 * launches as the end of its estimated queued work, plus VGPU_NODE_CLAIM_GRACE_NS).  The
 * ticker's yield verdict without a claimer list (no node region) holds as it is.  A low beside
 * a claiming high also keeps its own queue short (lim_low_queue_wait), so that a high burst
 * never waits behind more than ~LIM_LOW_QUEUE_NS of it.  At most SLEEP_CHUNK_NS ahead
 * (CLAIM_CHUNK_NS while claimed). */
static uint64_t must_wait(struct vgpu_cdev *c, uint64_t now, uint64_t cost)
{
    uint64_t end, hz, w, chunk;
    int light;

    if (LD(&c->forced))
        return now + SLEEP_CHUNK_NS;
    if (LD(&c->nclaim) == 0 || vgpu_cs.node == NULL)
        return LD(&c->yield) ? now + SLEEP_CHUNK_NS : 0;
    end = vgpu_cs_claim_end(c, now, &light);
    chunk = light ? CLAIM_CHUNK_LIGHT_NS : CLAIM_CHUNK_NS;
    if (end > now)
        return end < now + chunk ? end : now + chunk;
    hz = LD(&c->horizon);
    w = lim_low_queue_wait(hz > now ? hz - now : 0, cost, LIM_LOW_QUEUE_NS);
    return w == 0 ? 0 : now + (w < SLEEP_CHUNK_NS ? w : SLEEP_CHUNK_NS);
}

/* How long this process had nothing queued on a device before a launch that came at `came`,
 * its busy horizon `hz` (`gap`). */
static uint64_t gap_before(uint64_t came, uint64_t hz)
{
    return came > hz ? came - hz : 0u;
}

/* How long a light one had nothing queued before its claim began: before this launch, where it
 * begins one (it came after the last one ended), else the claim's (limiter.h,
 * LIM_LIGHT_RUN_GAP_NS).  A launch that came within a claim and then waited (its pace) keeps
 * that claim's: judged after the wait, a loop's each next kernel, paced 40 ms after its first
 * one's 17-ms work, began a claim 0.1-0.3 ms "after its previous work" and had a request's
 * credit (simulated GPU, a 30 % newcomer of 10-ms kernels beside a 70 % one). */
static uint64_t claim_gap(const struct vgpu_cdev *c, uint64_t came)
{
    return came > LD(&c->claim_until) ? gap_before(came, LD(&c->horizon)) : LD(&c->claim_gap);
}

void vgpu_claim_runs_on(struct vgpu_cdev *c, uint64_t now)
{
    uint64_t until = LD(&c->claim_until);

    if (LD(&c->claim_from) == 0)
        return; /* none began in this light spell: the work is older */

    while (until < now + LIM_LIGHT_CLAIM_JOIN_NS &&
           !__atomic_compare_exchange_n(&c->claim_until, &until, now + LIM_LIGHT_CLAIM_JOIN_NS, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The gate proper, for a launch of `key` on `stream` on device `d` (vgpu_compute_enter). */
void vgpu_gate_pass(struct vgpu_gate *g, uint64_t key, CUstream stream, CUdevice d, uint64_t now,
                    struct vgpu_capture_mode *m)
{
    struct vgpu_cdev *c = &vgpu_cs.dev[d];
    uint64_t est, raw = 0, wait, outstanding, queued, came = now;
    uint32_t limit;
    int known = 0; /* the samples the signature has, up to LIM_COST_SAMPLES */
    int want_sample, nudge = 0;
    uint64_t bound; /* the queue bound: 0 none */

    est = lim_cost_estimate(&vgpu_cs.costs, key, &known, &raw);
    queued = queued_work(est, known);
    wait = must_wait(c, now, queued);
    if (wait != 0) {
        uint64_t mark = wait_begin(c, now);
        if (vgpu_cs.proc != NULL)
            ST(&vgpu_cs.proc->compute.yielding, 1u);
        do {
            touch_waiting();
            vgpu_cs_sleep_until(wait); /* a claim's end, or the short queue's */
            credit_wait(c, &mark);
            wait = must_wait(c, vgpu_compute_now(), queued);
        } while (wait != 0);
        wait_end(c, &mark);
        if (vgpu_cs.proc != NULL)
            ST(&vgpu_cs.proc->compute.yielding, 0u);
        now = vgpu_compute_now();
    }
    limit = LD(&c->limit);
    ADD(&c->blk->launches, 1u);
    g->dev = d;

    /* The queue bound: no more than QUEUE_NS of estimated work ahead of the GPU, for paced
     * work and for low-priority work on a shared GPU (so that it can yield at short notice);
     * ALONE_QUEUE_NS for a low one with gpucores alone (`hold`: not paced, so that whoever
     * arrives next waits behind no more than that).
     * A kernel longer than that is credited what it has run (queue_ahead).  (Raising the
     * bound to one kernel of the launch's size was tried: two containers sharing, whose
     * samples include each other's queued work, then queued deeper, and a 70 % one read 0.47
     * where 0.70 was due; docs/benchmarks.md.) */
    bound = limit != 0                         ? QUEUE_NS
            : LD(&c->hold)                     ? ALONE_QUEUE_NS
            : vgpu_cs.priority == LIM_PRIORITY_LOW ? QUEUE_NS
                                               : 0;
    outstanding = LD(&c->submitted) - LD(&c->completed);
    vgpu_measure_poll_due(c, now, bound && outstanding > bound, m);
    outstanding = LD(&c->submitted) - LD(&c->completed);
    if (bound && outstanding > bound && queue_ahead(c, now, bound) > bound) {
        /* a wait like the pacer's, counted in waited_ns; the pacer below books at the time the
         * launch came (the time waited for its own work to drain is no idle GPU, so it keeps
         * the credit) */
        uint64_t mark = wait_begin(c, now);
        while (queue_ahead(c, vgpu_compute_now(), bound) > bound && LD(&c->count) > 0 &&
               !LD(&c->stalled) && await_measured(c, now, m))
            credit_wait(c, &mark);
        wait_end(c, &mark);
    }

    /* Launches of unknown cost under a queue bound: no more than PROVISIONAL_MAX of them in
     * flight, so that a loop that never synchronises cannot queue the driver's whole queue before
     * the bound knows the cost; once one is back, this signature's cost may be known.  A paced
     * one is charged provisionally (settled when its measurement is read, measure.c).  Under
     * `hold` too: the bound counts such a launch as HORIZON_UNKNOWN_NS, and a container alone
     * that began a loop of 10-ms kernels queued 100 of them, a second of work, in its first
     * 20 ms (sim), then waited 0.8 s for them; whoever came then waited behind that second. */
    if (bound != 0 && !known && LD(&c->unknown_in_flight) >= PROVISIONAL_MAX && !LD(&c->stalled)) {
        vgpu_measure_poll_due(c, 0, 1, m); /* short kernels: most are done already */
        if (LD(&c->unknown_in_flight) >= PROVISIONAL_MAX) {
            uint64_t from = vgpu_compute_now(), mark = wait_begin(c, from);
            while (LD(&c->unknown_in_flight) >= PROVISIONAL_MAX && LD(&c->count) > 0 &&
                   !LD(&c->stalled)) {
                touch_waiting();
                if (!await_measured(c, from, m))
                    break;
                credit_wait(c, &mark);
            }
            est = lim_cost_estimate(&vgpu_cs.costs, key, &known, &raw);
            queued = queued_work(est, known);
            wait_end(c, &mark);
            now = vgpu_compute_now();
        }
    }

    if (limit != 0) {
        /* Charged: the GPU time the launch would take on the saturated GPU (the estimate, DVFS
         * corrected sample by sample) times the busy feedback. */
        uint64_t charge = lim_scale_cost(est, LD(&c->scale_ppm));
        uint64_t turn = LD(&c->turn);
        int turns = turn != 0;
        /* the longest recent kernel, and the one that sets the turn period class (limiter.h) */
        uint32_t light = LD(&c->light);
        struct lim_longest l = lim_longest_next(
            (struct lim_longest){LD(&c->longest), LD(&c->longest_key), LD(&c->longest_light)},
            key, charge, known >= (int)YOUNG_SAMPLES, light);
        ST(&c->longest, l.ns);
        ST(&c->longest_key, l.key);
        ST(&c->longest_light, l.light);
        l = lim_longest_next((struct lim_longest){LD(&c->period_longest),
                                                  LD(&c->period_longest_key),
                                                  LD(&c->period_longest_light)},
                             key, charge,
                             known >= (int)lim_period_samples(light, LD(&c->light_left), now,
                                                              YOUNG_SAMPLES),
                             light);
        ST(&c->period_longest, l.ns);
        ST(&c->period_longest_key, l.key);
        ST(&c->period_longest_light, l.light);
        if (turns) {
            /* Taking turns: the window holds the share; the pacer, with a period of credit,
             * only keeps the long-run share of kernels longer than the window. */
            now = wait_turn(c, charge, now);
            wait = lim_pacer_book(&c->blk->tat_ns, now, charge, limit,
                                  vgpu_turn_unpack(turn).period_ns);
        } else if (LD(&c->sharing) || light) {
            /* a light one may spend a request's worth of credit at once (limiter.h) */
            uint64_t tol = light ? lim_light_tolerance(claim_gap(c, came), limit) : 0u;
            wait = lim_pacer_book_bursty(&c->blk->tat_ns, now, charge, limit,
                                         tol > TOLERANCE_SHARED_NS ? tol : TOLERANCE_SHARED_NS,
                                         TOLERANCE_SHARED_NS);
        } else {
            wait = lim_pacer_book(&c->blk->tat_ns, now, charge, limit, TOLERANCE_NS);
        }
        if (wait > 0) {
            uint64_t until = now + wait, mark = wait_begin(c, vgpu_compute_now());
            publish_busy(c, UINT64_MAX); /* it has work: no sibling runs work into its part */
            for (uint64_t t = now; t < until && LD(&c->limit) != 0 && !LD(&c->yield);
                 t = vgpu_compute_now()) {
                touch_waiting();
                gate_wait_until(until - t > SLEEP_CHUNK_NS ? t + SLEEP_CHUNK_NS : until);
                credit_wait(c, &mark);
            }
            wait_end(c, &mark);
            publish_busy(c, LD(&c->horizon));
            now = vgpu_compute_now();
            if (turns)
                now = wait_turn(c, charge, now);
        }
        ADD(&c->blk->charged_ns, raw); /* as measured: the busy feedback compares it with NVML */
        if (!known) { /* a provisional charge: settled when its measurement is read */
            g->provisional_ns = charge;
            g->provisional_pct = limit;
            g->provisional_raw = raw;
        }
    }
    /* what the queue bound counts: a launch of unknown cost alone under `hold` as `queued` (1 ms
     * at least), or a loop that never synchronises queues the driver's whole depth before its
     * first measurement is back (the paced path has PROVISIONAL_MAX for that) */
    g->est = bound == ALONE_QUEUE_NS && !known ? queued : est;
    {
        /* The busy horizon tells neighbours this process still has work queued (a process
         * waiting in a synchronize is active as long as its GPU work runs).  A launch of unknown
         * cost counts as HORIZON_UNKNOWN_NS at least (`queued`): better a neighbour yields a
         * little long than a starting high-priority job is seen idle while its first kernels
         * wait. */
        uint64_t hz = LD(&c->horizon);
        ST(&c->gap, gap_before(came, hz));
        hz = (hz > now ? hz : now) + queued;
        ST(&c->horizon, hz);
        publish_busy(c, hz);
        /* a high one (or a light one, limiter.h) tells its low neighbours at once how long it
         * keeps the GPU busy: its estimated work, plus the lows' short queue (LIM_LOW_QUEUE_NS)
         * that may run ahead of it */
        if ((vgpu_cs.priority == LIM_PRIORITY_HIGH || LD(&c->light)) && vgpu_cs.node != NULL &&
            c->node_slot >= 0) {
            __atomic_fetch_add(&c->claiming, 1u, __ATOMIC_SEQ_CST); /* before the claim */
            g->claimed = 1;
            vgpu_node_touch(vgpu_cs.node, c->node_slot, hz + LIM_LOW_QUEUE_NS);
            if (LD(&c->light)) { /* how long its claim has run without a break, and how much
                                  * GPU time it was charged meanwhile (limiter.h) */
                if (now > LD(&c->claim_until)) {
                    /* a new run (after a pause, or its own pace's wait: the neighbours had the
                     * GPU meanwhile); one that came within the last one and waited in its pace
                     * keeps that one's credit (claim_gap), and where that is none (the claim
                     * came after a long pause: a loop starting) its run goes on through the
                     * wait (limiter.h, LIM_LIGHT_RUN_MAX_NS) */
                    uint64_t charged = LD(&c->blk->charged_ns);
                    int waited = came <= LD(&c->claim_until);
                    int goes_on = waited && lim_light_tolerance(LD(&c->claim_gap), limit) == 0;
                    if (!goes_on) {
                        ST(&c->claim_from, now);
                        ST(&c->claim_charged,
                           limit != 0 && charged >= raw ? charged - raw : charged);
                    }
                    if (!waited)
                        ST(&c->claim_gap, LD(&c->gap));
                    vgpu_log(VGPU_LOG_DEBUG, "compute: a light claim %s %llu us after its "
                             "previous work%s: %llu us of pace in credit at once",
                             goes_on ? "goes on" : "begins",
                             (unsigned long long)(LD(&c->gap) / 1000u),
                             waited ? " (it came within the last one, and waited in its pace)"
                                    : "",
                             (unsigned long long)(lim_light_tolerance(LD(&c->claim_gap), limit) /
                                                  1000u));
                    nudge = 1; /* its watch begins with its measurement, not at the tick */
                }
                ST(&c->claim_until, hz + LIM_LIGHT_CLAIM_JOIN_NS);
            }
        }
    }

    /* Measure: unknown or young signatures, one in SAMPLE_EVERY, and whenever QUEUE_NS / 4 of
     * estimated work went by unmeasured: the queue bound counts what is outstanding from the
     * newest finished measurement, so a coarser grain would drain the queue (and idle the GPU)
     * before the bound lets a launch go.  Under `hold` only the bound's grain (a quarter of
     * ALONE_QUEUE_NS): nothing is paced, and a launch-bound loop alone keeps its speed (sim,
     * 5-us kernels synchronised after each: 25 % slower with one in SAMPLE_EVERY measured). */
    if (bound == ALONE_QUEUE_NS)
        want_sample = known < (int)YOUNG_SAMPLES ||
                      LD(&c->submitted) - LD(&c->sampled_at) >= ALONE_QUEUE_NS / 4u;
    else
        want_sample = known < (int)YOUNG_SAMPLES || sample_due(c) ||
                      LD(&c->submitted) - LD(&c->sampled_at) >= QUEUE_NS / 4u;
    g->unknown = bound != 0 && !known;
    if (want_sample)
        vgpu_measure_start(c, g, key, stream, m);
    if (nudge)
        vgpu_ticker_nudge();
}
