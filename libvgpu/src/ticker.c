/* The ticker thread and the late-work checks between ticks (see ticker.h, limiter.h and
 * docs/compute.md). */
#include "ticker.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "compute.h"
#include "compute_state.h"
#include "gate.h"
#include "limiter.h"
#include "log.h"
#include "measure.h"
#include "node.h"
#include "pressure.h"
#include "real.h"
#include "vgpu_compute.h"

/* ---- tunables (docs/compute.md explains each) ---------------------------------------------- */
#define TICK_NS        10000000ull /* ticker period: sharing/limit changes apply within this */
#define WATCH_NS       1000000ull  /* a high one with late work re-checks it this often */
#define WATCH_LIGHT_NS 100000ull   /* ... a light one (its claim's grace is shorter: node.h) */
#define WAIT_MARK_STALE_NS 100000000ull /* a wait in progress moves its mark at least every 2 ms
                                    * (gate.c); one this old belongs to a thread that died in it */

_Static_assert(VGPU_MAX_DEVICES <= 16u, "split_devs holds two bits per device entry");

/* A log line's time: CLOCK_MONOTONIC, the clock every process on the node reads (a benchmark
 * lines the turns' changes up with its own timeline by it). */
#define STAMP_FMT " [monotonic %llu.%03llu s]"
#define STAMP_ARGS(ns) (unsigned long long)((ns) / 1000000000ull), \
                       (unsigned long long)((ns) / 1000000ull % 1000ull)

/* The period class this process's longest recent kernels ask for at `limit` (its neighbours'
 * while it knows none of its own: lim_period_longest): in its part of the container's window
 * where the window is split (lim_split_wait). */
static uint32_t turn_class(const struct vgpu_cdev *c, uint32_t limit)
{
    uint32_t split = LD(&c->split);
    if (split > 1u)
        limit = limit / split > 0u ? limit / split : 1u;
    return lim_turn_class_kept(lim_period_longest(LD(&c->period_longest),
                                                  LD(&c->others_longest)),
                               limit, LD(&c->asked_class));
}

/* The container's processes in turns on `c`'s device that split its window (lim_split_wait):
 * this one among them when `want`, and its kernels long when `islong`, which it publishes in its
 * slot.  They split it when one of them has long kernels: their slots in part order go to
 * c->split_slot, this one's part to c->split_rank, their number to c->split (0: no split, also
 * when more than LIM_SPLIT_MAX).  One that launched (or waited to) longer than `stale` ago counts
 * no more (a dead one).  Scans the region's process slots only when `want`. */
static void split_window(struct vgpu_cdev *c, uint64_t now, int want, int islong, uint64_t stale)
{
    struct vgpu_region_proc *me = vgpu_cs.proc;
    uint32_t part = c->region_idx >= 0 ? 1u << c->region_idx : 0u, n = 0, i;
    uint32_t mine = want ? part | (islong ? part << 16 : 0u) : 0u, longs = 0, old;

    if (me == NULL || part == 0u) {
        ST(&c->split, 0u);
        return;
    }
    old = LD(&me->compute.split_devs);
    if (!(old & part) && mine)
        ST(&me->compute.busy_until_ns,
           lim_split_busy_until(LD(&c->horizon), LD(&c->longest), LD(&c->gap)));
    if ((old & (part | part << 16)) != mine) /* only this process writes its slot's bits */
        ST(&me->compute.split_devs, (old & ~(part | part << 16)) | mine);
    if (!want) {
        ST(&c->split, 0u);
        return;
    }
    for (i = 0; i < VGPU_MAX_PROCS; i++) {
        struct vgpu_region_proc *p = &vgpu_cs.region.r->procs[i];
        uint32_t bits = LD(&p->compute.split_devs);
        if (p != me && (LD(&p->state) != VGPU_PROC_ACTIVE || !(bits & part) ||
                        LD(&p->compute.active_ns) + stale < now))
            continue;
        longs |= (p == me ? mine : bits) & part << 16;
        if (n < LIM_SPLIT_MAX)
            ST(&c->split_slot[n], i);
        if (p == me)
            ST(&c->split_rank, n);
        n++;
    }
    ST(&c->split, longs && n <= LIM_SPLIT_MAX ? n : 0u);
}

/* This container's turn on the device, by its `share`, among the `n` other paced containers
 * active there, `m` (room for one more: limiter.h), in periods of the largest class any of its
 * processes asks for: this one's, or `own_class`, its siblings' (vgpu_node_paced).  (Each
 * process once took its own class: where their longest kernels differed, its processes computed
 * windows of different periods, and overlapped.) */
static uint64_t turn_of(struct vgpu_cdev *c, struct lim_turn_member *m, uint32_t n,
                        uint32_t share, uint32_t own_class)
{
    if (n == 0)
        return 0;
    uint32_t mine = turn_class(c, share);
    ST(&c->asked_class, mine);
    m[n].id = vgpu_cs.container_id;
    m[n].limit_pct = share;
    m[n].period_class = mine > own_class ? mine : own_class; /* one period for the container */
    m[n].capped = LD(&c->capped);
    m[n].rest = LD(&c->rest);
    return vgpu_turn_pack(lim_turn_window(m, n + 1, vgpu_cs.container_id));
}

/* What lim_view takes of a list of other containers (turn members): their shares, the caps'
 * among them, and how many have no gpucores of their own with what shares. */
struct member_sums {
    uint32_t pct, capped_pct, rest, rest_pct;
};

static struct member_sums sum_members(const struct lim_turn_member *m, uint32_t n)
{
    struct member_sums s = {0, 0, 0, 0};

    for (uint32_t i = 0; i < n; i++) {
        s.pct += m[i].limit_pct;
        s.capped_pct += m[i].capped ? m[i].limit_pct : 0u;
        s.rest += m[i].rest;
        s.rest_pct += m[i].rest ? m[i].limit_pct : 0u;
    }
    return s;
}

/* Whether a claiming neighbour (a high one, or a light one when this one waits for those: the
 * claimers list) was busy at any time after `since` (0: not known).  While it is, this
 * container's launches wait for it and its work queued before them runs behind the claimer's:
 * time blocked in a synchronisation then reads as idle (no wait in the gate, no GPU time
 * charged).  H200, a 70 % loop of 4096² matmuls synchronised every 4 beside a light 30 %
 * service of 8 of them every ~4 ms: the loop read 33 % used and 54 % idle, was found light too,
 * and the two, both light, no longer waited for each other (the loop at 57-59 % of its alone
 * throughput). */
static int claimed_since(const struct vgpu_cdev *c, uint64_t since)
{
    return since != 0 && vgpu_cs_claim_end(c, since, NULL) != 0;
}

/* The container's recent use of the device (lim_use_avg over the GPU time charged to it, every
 * process of the container alike), its idle share (lim_idle_avg: the time it did not wait in the
 * gate nor fill with GPU time) and, from them, whether it is light (lim_light), while it is
 * paced under `default` and knows its neighbours (under `force` a share is a cap: capped
 * neighbours would not use what it leaves); otherwise it starts again from the whole GPU,
 * busy.  Held as it is while the process yields (waiting for a claim is no lack of work), over
 * a tick in which a claiming neighbour was busy (claimed_since), and before its first launch (a
 * process that is still loading is not idle). */
static uint32_t follow_use(struct vgpu_cdev *c, const struct vgpu_compute_device *b, uint64_t now,
                           int node_known)
{
    uint32_t limit = LD(&c->limit), light, idle;
    enum lim_hold held;
    struct lim_claim claim;
    uint64_t run, mark = LD(&c->wait_mark), charged = LD(&b->charged_ns);
    uint64_t waited = LD(&b->waited_ns);

    if (limit == 0 || !node_known || vgpu_cs.policy != LIM_POLICY_DEFAULT) {
        c->use_x100 = 10000u;
        c->waited_x100 = 0;
        c->idle = (struct lim_idle){0, 0};
        c->use_at = c->use_since = 0;
        ST(&c->light, 0u);
        return 0;
    }
    if (LD(&c->yield) || LD(&c->horizon) == 0 || claimed_since(c, c->use_at)) {
        c->use_at = 0; /* yielding, a neighbour claimed the GPU, or not launched yet */
        return LD(&c->light);
    }
    if (mark != 0 && now > mark && now - mark >= WAIT_MARK_STALE_NS) /* free it for others */
        (void)__atomic_compare_exchange_n(&c->wait_mark, &mark, 0u, 0, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED);
    else if (mark != 0 && now > mark) /* a wait in progress, counted up to now (gate.c) */
        waited += now - mark;
    if (c->use_at != 0 && charged >= c->use_charged && waited >= c->use_waited) {
        c->use_x100 = lim_use_avg(c->use_x100, charged - c->use_charged, now - c->use_at);
        c->idle = lim_idle_avg(c->idle, charged - c->use_charged, waited - c->use_waited,
                               now - c->use_at);
        c->waited_x100 = lim_waited_avg(c->waited_x100, waited - c->use_waited,
                                        now - c->use_at);
    }
    c->use_charged = charged;
    c->use_waited = waited;
    c->use_at = now;
    if (c->use_since == 0)
        c->use_since = now;
    idle = lim_idle_share(c->idle);
    /* its claim, running without a break since claim_from (gate.c), or none */
    run = LD(&c->light) && LD(&c->claim_until) > now && now > LD(&c->claim_from)
              ? now - LD(&c->claim_from) : 0u;
    claim = (struct lim_claim){run, 0u, LD(&c->claim_gap)};
    if (run != 0 && charged > LD(&c->claim_charged))
        claim.charged_ns = charged - LD(&c->claim_charged);
    held = lim_held_back(c->waited_x100, LD(&c->longest), claim);
    /* against its share (a weight), not the pace it scales to (lim_share_scaled) */
    light = lim_light(LD(&c->light), c->use_x100, idle, held != LIM_HOLD_NONE, LD(&c->share),
                      now > c->use_since ? now - c->use_since : 0u);
    if (light != LD(&c->light))
        vgpu_log(VGPU_LOG_INFO, "compute: used %u.%02u %% of the GPU lately at a %u %% share, "
                 "idle %u %% of the time, waited %u %%, longest kernel %llu us, claimed %llu ms "
                 "without a break (%llu ms of GPU time): %s",
                 c->use_x100 / 100u, c->use_x100 % 100u, LD(&c->share), idle / 100u,
                 c->waited_x100 / 100u, (unsigned long long)(LD(&c->longest) / 1000u),
                 (unsigned long long)(run / 1000000u),
                 (unsigned long long)(claim.charged_ns / 1000000u),
                 light ? "light (claims the GPU while busy, out of the turns)" : "no longer light");
    if (light && !LD(&c->light)) {
        c->waited_x100 = 0; /* its waits so far were for windows: from now on, for its pace */
        c->light_at = now;
        /* no claim in this light spell yet (vgpu_claim_runs_on keeps none on before one begins;
         * the gate begins one only once it reads light) */
        ST(&c->claim_from, 0u);
        ST(&c->claim_until, 0u);
    } else if (!light && LD(&c->light) && (held != LIM_HOLD_NONE || run != 0)) {
        /* held back (by its own pace, or a claim that ran on), or past its share while its claim
         * runs (busy): it starts again busy (limiter.h) */
        c->use_x100 = 10000u;
        c->waited_x100 = 0;
        c->idle = (struct lim_idle){0, 0};
        c->use_since = now;
        if (held == LIM_HOLD_RUN) { /* a claim that ran on: out of light longer */
            c->run_backoff = lim_run_backoff(c->run_backoff, now - c->light_at);
            c->use_since = now + (c->run_backoff - LIM_LIGHT_SETTLE_NS);
        }
    }
    if (!light && LD(&c->light))
        ST(&c->light_left, now);
    ST(&c->light, light);
    return light;
}

/* A high one not held to a share, or a light one: its neighbours wait while it is busy. */
static int claims(const struct vgpu_cdev *c)
{
    return (vgpu_cs.priority == LIM_PRIORITY_HIGH && !LD(&c->limit)) || LD(&c->light);
}

static _Thread_local int t_ticker; /* this thread is the ticker (its capture mode is relaxed) */

enum work { WORK_ON_TIME, WORK_LATE, WORK_DONE };

/* No launch between its claim and `submitted`, and a complete measurement covers everything in
 * `submitted` (a launch after the newest measured one leaves it short: not known done). */
static int all_done(struct vgpu_cdev *c)
{
    return __atomic_load_n(&c->claiming, __ATOMIC_SEQ_CST) == 0 &&
           LD(&c->submitted) == LD(&c->completed);
}

/* A high-priority process beside others, between its launches: its measured work runs late (not
 * complete past its estimated end: it may wait in a synchronise behind other containers' queued
 * work), or all it launched is done (every launch's estimate counted in `submitted` is covered
 * by a measurement seen complete), or neither.  The ticker polls the measurements itself, since
 * no launch comes to do it. */
static enum work work_state(struct vgpu_cdev *c, uint64_t now)
{
    uint32_t n;
    uint64_t due = 0;

    static _Thread_local CUcontext current; /* the ticker's own current context */

    if (!t_ticker || !claims(c))
        return WORK_ON_TIME;
    if (LD(&c->count) == 0)
        return all_done(c) ? WORK_DONE : WORK_ON_TIME;
    vgpu_cs_lock(&c->lock);
    /* the events belong to pool_ctx: make it the ticker's current context for the queries */
    if (c->pool_ctx != NULL && c->pool_ctx != current && vgpu_cu.cuCtxSetCurrent != NULL &&
        vgpu_cu.cuCtxSetCurrent(c->pool_ctx) == CUDA_SUCCESS)
        current = c->pool_ctx;
    if (current != c->pool_ctx) { /* no context to query in: say nothing */
        vgpu_cs_unlock(&c->lock);
        return WORK_ON_TIME;
    }
    vgpu_measure_poll_locked(c);
    n = c->count;
    if (n > 0)
        due = c->ring[(c->head + n - 1u) % VGPU_CS_RING].due;
    vgpu_cs_unlock(&c->lock);
    if (n > 0)
        return due < now ? WORK_LATE : WORK_ON_TIME;
    return all_done(c) ? WORK_DONE : WORK_ON_TIME;
}

/* How often the ticker watches its claims between ticks (watch): 0 not now. */
static uint64_t watching(void)
{
    uint64_t every = 0;
    int d;

    if (vgpu_cs.node == NULL)
        return 0;
    for (d = 0; d < vgpu_cs.ndev; d++) {
        const struct vgpu_cdev *c = &vgpu_cs.dev[d];
        if (claims(c) && LD(&c->track) && LD(&c->count) > 0)
            every = LD(&c->light) ? WATCH_LIGHT_NS : every ? every : WATCH_NS;
    }
    return every;
}

/* work_state(c), acted on: all done cuts the claim (`claim`, read before) and the busy horizon
 * back to now (a launch that moved either meanwhile keeps its own: the heartbeat republishes the
 * horizon).  Returns 1 when the work runs late (the caller keeps the claim ahead). */
static int keep_claim(struct vgpu_cdev *c, uint64_t now, uint64_t claim)
{
    enum work w = work_state(c, now);
    uint64_t hz;

    if (w == WORK_DONE && vgpu_cs.node != NULL && c->node_slot >= 0) {
        hz = LD(&c->horizon);
        if (hz > now)
            (void)__atomic_compare_exchange_n(&c->horizon, &hz, now, 0, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED);
        vgpu_node_cut_claim(vgpu_cs.node, c->node_slot, claim, now);
    }
    return w == WORK_LATE;
}

/* Between ticks, every `every` (WATCH_NS, WATCH_LIGHT_NS): a claiming process (a high-priority
 * one, or a light one) beside lows keeps its claim (its node slot's activity) `every` + the claim
 * grace ahead while its work runs late, so that lows do not
 * slip work in while it waits for its own; and cuts the claim back to now once all its work is
 * done, so that lows go on one claim grace after that instead of after the claim it published
 * (its estimated work plus LIM_LOW_QUEUE_NS, or what the late work kept extending: on the
 * simulated GPU, a low one beside a high one busy 30 % in bursts left the GPU idle ~3.7 ms
 * after each 10-ms burst).  The claim is read before the work: a launch that publishes a new
 * one in between makes the cut fail, and one that published it before is counted in
 * `claiming` until its estimate is in `submitted`. */
static void watch(uint64_t now, uint64_t every)
{
    int d;

    if (vgpu_cs.node == NULL || vgpu_cs.exiting)
        return;
    for (d = 0; d < vgpu_cs.ndev; d++) {
        struct vgpu_cdev *c = &vgpu_cs.dev[d];
        uint64_t claim;

        if (c->node_slot < 0 || !LD(&c->track) || !claims(c))
            continue;
        claim = __atomic_load_n(&vgpu_cs.node->slots[c->node_slot].active_ns, __ATOMIC_SEQ_CST);
        int had = LD(&c->count) > 0;
        if (!keep_claim(c, now, claim)) {
            /* its watched work just ended: a light claim's join runs from now, so that a
             * launch after a synchronise that returned a little late still goes on with it
             * (simulated GPU, 3-ms kernels on a loaded machine: 3-4 ms after the estimate) */
            if (had && LD(&c->light) && LD(&c->count) == 0)
                vgpu_claim_runs_on(c, now);
            continue;
        }
        if (claim < now + every)
            vgpu_node_touch(vgpu_cs.node, c->node_slot, now + 2u * every);
        if (LD(&c->light)) /* its claim runs on with its late work (LIM_LIGHT_CLAIM_JOIN_NS) */
            vgpu_claim_runs_on(c, now);
    }
}

void vgpu_tick(uint64_t now)
{
    uint32_t w = __atomic_fetch_and(&vgpu_compute_word, ~VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
    int gate = 0;
    int may_pace = vgpu_cs.policy == LIM_POLICY_FORCE;
    int d;

    if (w & VGPU_COMPUTE_TOUCHED)
        vgpu_cs.last_active_ns = now;
    vgpu_cs_find_proc_slot();
    if (vgpu_cs.proc != NULL) {
        /* what its siblings see (split_window): it launched, or waits in the gate now (a pace
         * may hold it longer than a period) */
        uint64_t seen = vgpu_cs.last_active_ns;
        for (d = 0; d < vgpu_cs.ndev; d++)
            if (LD(&vgpu_cs.dev[d].wait_mark) != 0)
                seen = now;
        ST(&vgpu_cs.proc->compute.active_ns, seen);
    }
    if (vgpu_cs.have_region) {
        vgpu_cs.policy = LD(&vgpu_cs.region.r->compute.core_policy);
        vgpu_cs.priority = LD(&vgpu_cs.region.r->compute.priority);
        vgpu_cs.me.priority = vgpu_cs.priority;
    }
    for (d = 0; d < vgpu_cs.ndev; d++) {
        struct vgpu_cdev *c = &vgpu_cs.dev[d];
        struct vgpu_compute_device *b;
        struct vgpu_node_census census = {0, 0, 0, 0};
        struct lim_turn_member members[LIM_TURN_MAX]; /* the other paced ones, room for me */
        struct lim_view v;
        struct lim_verdict r;
        uint32_t flags = 0;

        if (c->region_idx < 0)
            vgpu_cs_bind_device(c, (unsigned)d);
        b = c->blk;
        uint64_t claim = vgpu_cs.node != NULL && c->node_slot >= 0
                             ? __atomic_load_n(&vgpu_cs.node->slots[c->node_slot].active_ns,
                                               __ATOMIC_SEQ_CST)
                             : 0;
        int late = keep_claim(c, now, claim);
        uint64_t active = LD(&c->horizon) > vgpu_cs.last_active_ns ? LD(&c->horizon)
                                                                   : vgpu_cs.last_active_ns;
        if (late && active < now + 2u * WATCH_NS)
            active = now + 2u * WATCH_NS; /* late work: claimed until the next watch */
        if (vgpu_cs.node != NULL && !vgpu_cs.exiting) {
            if (c->node_slot < 0 ||
                vgpu_node_beat(vgpu_cs.node, c->node_slot, &vgpu_cs.me, now, active,
                               (LD(&c->share) ? VGPU_NODE_FLAG_LIMITED : 0u) |
                                   (LD(&c->yield) ? VGPU_NODE_FLAG_YIELDING : 0u) |
                                   (LD(&c->light) ? VGPU_NODE_FLAG_LIGHT : 0u) |
                                   (LD(&c->capped) ? VGPU_NODE_FLAG_CAPPED : 0u) |
                                   (LD(&c->rest) ? VGPU_NODE_FLAG_REST : 0u),
                               vgpu_node_turn(LD(&c->share), turn_class(c, LD(&c->share)),
                                              LD(&c->period_longest))) != 0) {
                c->node_slot = vgpu_node_claim(vgpu_cs.node, &vgpu_cs.me, c->uuid, now);
                if (c->node_slot >= 0)
                    vgpu_node_beat(vgpu_cs.node, c->node_slot, &vgpu_cs.me, now, active, 0, 0);
            }
            vgpu_node_census(vgpu_cs.node, c->uuid, vgpu_cs.container_id, now, &census);
        }
        v.policy = vgpu_cs.policy;
        v.priority = vgpu_cs.priority;
        v.limit_pct = LD(&b->limit_pct);
        v.agent_limit_pct = LD(&b->agent_limit_pct);
        if ((v.limit_pct > 0 && v.limit_pct < 100) ||
            (v.agent_limit_pct > 0 && v.agent_limit_pct < 100))
            may_pace = 1;
        v.agent_yield = LD(&b->agent_yield);
        v.node_known = vgpu_cs.node != NULL && c->node_slot >= 0;
        v.others_high = census.high;
        v.others_low = census.low;
        v.light = follow_use(c, b, now, v.node_known != 0);
        v.others_light = census.light;
        v.others_paced = v.node_known ? vgpu_node_paced(vgpu_cs.node, c->uuid,
                                                        vgpu_cs.container_id, now, 1, members,
                                                        LIM_TURN_MAX - 1, NULL)
                                      : 0u;
        struct member_sums paced = sum_members(members, v.others_paced), lights = {0, 0, 0, 0};
        uint64_t others_longest = 0; /* stored at the end: this tick goes by the last one's */
        for (uint32_t i = 0; i < v.others_paced; i++)
            if (members[i].longest_ns > others_longest)
                others_longest = members[i].longest_ns;
        v.others_paced_pct = paced.pct;
        v.others_capped_pct = paced.capped_pct;
        v.others_rest = paced.rest;
        v.others_rest_pct = paced.rest_pct;
        v.rest_pct = LD(&c->rest) ? LD(&c->share) : 0u;
        /* the light ones, out of the turns, count in what is left to one without gpucores (a
         * scan of the node region only where that can be taken) */
        if (lim_may_take_rest(&v) && v.others_paced > v.others_rest)
            lights = sum_members(members, vgpu_node_lights(vgpu_cs.node, c->uuid,
                                                           vgpu_cs.container_id, now, members,
                                                           LIM_TURN_MAX - 1));
        v.others_light_pct = lights.pct - lights.rest_pct;
        v.others_light_rest = lights.rest;
        r = lim_decide(&v);
        if (r.limit_pct != LD(&c->limit) || r.yield != LD(&c->yield) ||
            r.share_pct != LD(&c->share))
            vgpu_log(VGPU_LOG_INFO, "compute: device %d: %s, others active: %u high %u low %u "
                     "light (%u present, %u paced at %u %%)%s -> %s%u%% (share %u %%%s)%s"
                     STAMP_FMT, d,
                     v.node_known ? "node region" : "no node region", census.high, census.low,
                     census.light, census.present, v.others_paced, v.others_paced_pct,
                     v.light ? ", light" : "", r.limit_pct ? "paced to " : "not paced ",
                     r.limit_pct, r.share_pct, r.rest ? ": what the others' leave" : "",
                     r.yield ? ", yielding" : "", STAMP_ARGS(now));
        ST(&c->limit, r.limit_pct);
        ST(&c->share, r.share_pct);
        ST(&c->capped, r.capped);
        ST(&c->rest, r.rest);
        if (r.limit_pct)
            may_pace = 1;
        ST(&c->yield, r.yield);
        ST(&c->forced, v.agent_yield == LIM_AGENT_YIELD ? 1u : 0u);
        {
            /* a low watches its claiming-high neighbours on every launch (must_wait in gate.c),
             * and under `default` its light ones too (unless light itself) */
            uint32_t slots[VGPU_CS_CLAIM_MAX], n = 0, i;
            if (vgpu_cs.node != NULL && c->node_slot >= 0 && vgpu_cs.priority == LIM_PRIORITY_LOW &&
                vgpu_cs.policy != LIM_POLICY_DISABLE && v.agent_yield != LIM_AGENT_RUN)
                n = vgpu_node_claimers(vgpu_cs.node, c->uuid, vgpu_cs.container_id, now,
                                       !v.light && vgpu_cs.policy == LIM_POLICY_DEFAULT, slots,
                                       VGPU_CS_CLAIM_MAX);
            for (i = 0; i < n; i++)
                ST(&c->claim[i], slots[i]);
            ST(&c->nclaim, n);
        }
        /* a light one is out of the turns: the others count it out of theirs (node.c) */
        {
            uint32_t own_class = 0, n = 0;
            uint64_t turn = 0;
            if (v.node_known && r.limit_pct && !r.yield && !v.light) {
                n = vgpu_node_paced(vgpu_cs.node, c->uuid, vgpu_cs.container_id, now, 0, members,
                                    LIM_TURN_MAX - 1, &own_class);
                turn = turn_of(c, members, n, r.share_pct, own_class);
            }
            /* a part of the container's window, while it launches (or waits to) within a
             * period and a process of the container has long kernels (the region's process
             * slots are scanned only then) */
            uint64_t period = vgpu_turn_unpack(turn).period_ns;
            uint64_t *long_until = vgpu_cs.proc != NULL
                                       ? &vgpu_cs.region.r->compute.long_until_ns : NULL;
            int in_turns = long_until != NULL && turn != 0 &&
                           now - LD(&vgpu_cs.proc->compute.active_ns) <= period;
            int islong = in_turns && LD(&c->longest) >= LIM_SPLIT_LONGEST_NS;
            if (islong && LD(long_until) < now + period / 2u)
                ST(long_until, now + period);
            split_window(c, now, in_turns && (islong || LD(long_until) > now), islong, period);
            if (turn != LD(&c->turn)) { /* which period its kernels set, for a debug log */
                struct lim_turn t = vgpu_turn_unpack(turn);
                if (t.len_ns == 0)
                    vgpu_log(VGPU_LOG_DEBUG, "compute: device %d: no turns" STAMP_FMT, d,
                             STAMP_ARGS(now));
                else
                    vgpu_log(VGPU_LOG_DEBUG, "compute: device %d: turns: window %u ms at %u ms "
                             "of %u ms (longest kernel %llu us%s)" STAMP_FMT, d,
                             t.len_ns / 1000000u, t.off_ns / 1000000u, t.period_ns / 1000000u,
                             (unsigned long long)(lim_period_longest(LD(&c->period_longest),
                                                                     LD(&c->others_longest)) /
                                                  1000u),
                             LD(&c->period_longest) ? "" : ", its neighbours'", STAMP_ARGS(now));
            }
            ST(&c->turn, turn);
        }
        ST(&c->others_longest, others_longest);
        if (LD(&c->turn))
            flags |= VGPU_COMPUTE_FLAG_TURNS;
        if (v.light)
            flags |= VGPU_COMPUTE_FLAG_LIGHT;
        ST(&c->track, census.present > 0 ? 1u : 0u);
        /* a low one with gpucores, alone and not paced, keeps its queue no deeper than
         * ALONE_QUEUE_NS (gate.c), so that a newcomer never waits behind seconds of it */
        ST(&c->hold, census.present == 0 && !r.limit_pct && !r.yield &&
                         vgpu_cs.priority == LIM_PRIORITY_LOW &&
                         vgpu_cs.policy != LIM_POLICY_DISABLE && v.limit_pct > 0 &&
                         v.limit_pct < 100
                     ? 1u
                     : 0u);
        uint32_t others = census.high + census.low + census.light; /* active on the GPU */
        ST(&c->sharing, others > 0 ? 1u : 0u);
        if (others)
            flags |= VGPU_COMPUTE_FLAG_SHARING;
        if (r.limit_pct)
            flags |= VGPU_COMPUTE_FLAG_LIMITED;
        if (r.yield)
            flags |= VGPU_COMPUTE_FLAG_YIELDING;
        if (!v.node_known)
            flags |= VGPU_COMPUTE_FLAG_NODE_UNKNOWN;
        ST(&b->effective_pct, r.limit_pct);
        ST(&b->flags, flags);
        if (r.limit_pct || r.yield || census.present > 0 || LD(&c->hold))
            gate = 1;
    }
    if (may_pace && !vgpu_cs.clock_started && vgpu_cs.ndev > 0)
        vgpu_clock_start();
    if (gate)
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&vgpu_compute_word, ~VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
}

void vgpu_ticker_nudge(void)
{
    /* the claim's measurement (c->count) before the ticker's word: it sees one or the other */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (LD(&vgpu_cs.tick_nudge) == 0 &&
        __atomic_exchange_n(&vgpu_cs.tick_nudge, 1u, __ATOMIC_SEQ_CST) == 0)
        (void)syscall(SYS_futex, &vgpu_cs.tick_nudge, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleeps until `t` (CLOCK_MONOTONIC) or a nudge: 1 when nudged (or there is a claim to watch)
 * before `t`. */
static int sleep_until_nudged(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    uint64_t every;

    __atomic_store_n(&vgpu_cs.tick_nudge, 0u, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    every = watching(); /* a claim whose nudge found the word at 1 (the ticker awake) */
    if (every != 0 && vgpu_compute_now() + every < t)
        __atomic_store_n(&vgpu_cs.tick_nudge, 1u, __ATOMIC_SEQ_CST);
    while (LD(&vgpu_cs.tick_nudge) == 0 && vgpu_compute_now() < t)
        /* FUTEX_WAIT_BITSET: an absolute CLOCK_MONOTONIC timeout (futex(2)) */
        (void)syscall(SYS_futex, &vgpu_cs.tick_nudge, FUTEX_WAIT_BITSET_PRIVATE, 0u, &ts, NULL,
                      FUTEX_BITSET_MATCH_ANY);
    return __atomic_exchange_n(&vgpu_cs.tick_nudge, 1u, __ATOMIC_SEQ_CST) != 0 &&
           vgpu_compute_now() < t;
}

static void *ticker_main(void *arg)
{
    uint64_t next = vgpu_compute_now();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    (void)arg;
    /* the ticker's own driver calls (work_state) must never touch another thread's capture */
    t_ticker = vgpu_cs.exchange_mode == NULL || vgpu_cs.exchange_mode(&mode) == CUDA_SUCCESS;
    for (;;) {
        next += TICK_NS;
        /* only a claiming process (high, or light) beside others wakes between ticks (watch);
         * a light claim that begins while the ticker sleeps to its tick wakes it (a kernel of
         * unknown cost, estimated ~1 ms, would otherwise end its claim by that estimate before
         * the tick: LIM_LIGHT_CLAIM_JOIN_NS) */
        do {
            for (uint64_t t = vgpu_compute_now(), every;
                 (every = watching()) != 0 && t + every < next; t = vgpu_compute_now()) {
                vgpu_cs_sleep_until(t + every);
                watch(vgpu_compute_now(), every);
            }
        } while (sleep_until_nudged(next));
        uint64_t now = vgpu_compute_now();
        if (now > next + 10 * TICK_NS) /* stopped (SIGSTOP, suspend): do not catch up */
            next = now;
        vgpu_tick(now);
        vgpu_pressure_tick(now);
    }
    return NULL;
}

int vgpu_ticker_start(void)
{
    pthread_t t;
    pthread_attr_t attr;
    int rc;

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, ticker_main, NULL) != 0 ? -1 : 0;
    pthread_attr_destroy(&attr);
    return rc;
}
