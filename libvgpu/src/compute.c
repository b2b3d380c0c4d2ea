/* The compute limiter at run time (see compute.h, limiter.h and docs/compute.md). */
#include "compute.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "limiter.h"
#include "log.h"
#include "core.h"
#include "node.h"
#include "real.h"
#include "region.h"
#include "vgpu_compute.h"

/* ---- tunables (docs/compute.md explains each) ---------------------------------------------- */
#define TICK_NS        10000000ull /* ticker period: sharing/limit changes apply within this */
#define TOLERANCE_NS   2000000ull  /* pacer burst: the most GPU-time credit, in wall time */
#define TOLERANCE_SHARED_NS 20000000ull /* ... on a shared GPU, where launches go in bursts */
#define CLOCK_PERIOD_NS 100000000ull /* NVML clock/utilisation sampling (DVFS correction) */
#define FEEDBACK_SETTLE_NS 1000000000ull /* busy feedback: conditions held this long first */
#define FEEDBACK_WINDOW_NS 500000000ull /* busy feedback: the shortest window */
#define FEEDBACK_WINDOW_KERNELS 16u     /* ... at least this many of the longest kernels' paces */
#define FEEDBACK_WINDOW_MAX_NS 8000000000ull
#define QUEUE_NS       2000000ull  /* estimated work a process may have queued ahead */
#define SLEEP_CHUNK_NS 2000000ull  /* waits re-check yield/limit this often */
#define SAMPLE_EVERY   32u         /* measure one launch in this many, once a cost is known: a
                                    * measurement costs two cuEventRecord (~1.1 us each on the
                                    * H200), which a launch-bound application pays */
#define HORIZON_UNKNOWN_NS 1000000ull /* busy horizon of a launch whose cost is not known yet */
#define RING           32u         /* measurements in flight per device */
#define CLAIM_MAX      8u          /* claiming-high processes a low watches per device */
#define CLAIM_POLL_NS  100000ull   /* a low waiting for a claiming high re-checks this often */
#define WATCH_NS       1000000ull  /* a high one with late work re-checks it this often */
#define POOL           (2u * RING + 4u)
#define CLOCKS         8u          /* NVML clock readings kept per device (the last 0.8 s) */

uint32_t vgpu_compute_word;

typedef CUresult (*is_capturing_fn)(CUstream stream, int *status);
typedef CUresult (*exchange_mode_fn)(CUstreamCaptureMode *mode);
typedef nvmlReturn_t (*nvml_init_fn)(void);
typedef nvmlReturn_t (*nvml_by_uuid_fn)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*nvml_clock_fn)(nvmlDevice_t device, unsigned int type, unsigned int *mhz);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t device, nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*nvml_mw_fn)(nvmlDevice_t device, unsigned int *milliwatts);
#define NVML_CLOCK_SM_ID 1u /* nvmlClockType_t NVML_CLOCK_SM */

struct pend {
    CUevent start;
    CUevent end;
    uint64_t key;
    uint64_t mark;    /* the device's `submitted` after this launch */
    uint64_t due;     /* when its work is estimated to end (the busy horizon): not polled before */
    uint64_t cpu_ns;  /* CPU time of the real launch call */
    uint32_t chained; /* the queue was busy when `start` was recorded */
    uint32_t live;
    uint64_t launched; /* CLOCK_MONOTONIC of the launch: its clock tag reads from there on */
};

struct cdev {
    uint32_t limit;   /* verdict: pace to this share, 0 not paced (atomic) */
    uint32_t yield;   /* verdict: wait (atomic) */
    uint32_t forced;  /* the agent's override says yield (atomic) */
    uint32_t nclaim;  /* a low's claiming-high neighbours, slots in claim[] (atomic; ticker) */
    uint32_t claim[CLAIM_MAX];
    uint32_t track;   /* others share the GPU: keep the busy horizon even when not paced */
    uint32_t sharing; /* another container is active on the GPU: pace in bursts (atomic) */
    uint64_t turn;    /* paced containers take turns: turn_pack(), 0 none (atomic) */
    uint64_t longest; /* charged cost of the longest recent launch, decaying (atomic) */
    uint32_t scale_ppm; /* correction of charged costs: the busy feedback (atomic) */
    uint32_t ref_mhz;   /* f_sat: measured, else estimated from power, 0 none (atomic) */
    uint64_t clocks[CLOCKS]; /* the clock thread's readings: ms << 16 | lim_clock_tag (atomic) */
    uint32_t nclocks;        /* readings ever written (atomic) */
    /* the clock thread's own (limiter.h: DVFS correction, busy feedback) */
    nvmlDevice_t nvml;  /* NULL: none */
    uint32_t sat_mhz;   /* SM clock seen on the saturated GPU, 0 none yet */
    uint32_t est_mhz;   /* f_sat estimated from power while sat_mhz is 0 (limiter.h), 0 none */
    uint32_t limit_mw;  /* the GPU's enforced power limit, 0 unknown */
    uint32_t fb_ppm;    /* busy-feedback factor */
    uint32_t fb_down;   /* the last window asked for a lower factor */
    uint32_t fb_limit;  /* the limit the feedback conditions started with */
    uint64_t fb_since;  /* when the feedback conditions (paced, alone) began, 0 not now */
    uint64_t win_t0, win_c0, win_busy, win_prev; /* the current feedback window */
    uint64_t horizon; /* when this process's estimated queued work on the device ends (atomic) */
    uint32_t flags;   /* VGPU_COMPUTE_FLAG_* */
    int region_idx;   /* device entry, -1: not in the region yet, `local` is used */
    uint8_t uuid[16];
    int node_slot;
    struct vgpu_compute_device *blk;
    struct vgpu_compute_device local;
    /* measurements, under `lock` (a spin flag; held for a few driver calls at most) */
    uint32_t lock;
    struct pend ring[RING];
    uint32_t head;
    uint32_t count;
    CUevent pool[POOL];
    uint32_t npool;
    CUcontext pool_ctx;
    uint64_t poll_due;  /* `due` of the oldest measurement in the ring (under `lock`) */
    uint64_t submitted; /* estimated ns launched through the gate */
    uint64_t sampled_at; /* `submitted` when the newest measurement was taken */
    uint64_t completed; /* `mark` of the newest measurement seen complete */
    uint64_t min_cpu_ns; /* smallest CPU time of a sampled launch (rises by 1/256 a sample) */
    uint64_t nlaunch;
};

static struct {
    pid_t pid; /* the process this state belongs to (fork resets it) */
    int ndev;
    uint32_t policy;
    uint32_t priority;
    uint64_t container_id;
    struct vgpu_region_handle region;
    int have_region;
    struct vgpu_region_proc *proc; /* this process's slot, once found */
    struct vgpu_node_region *node;
    struct vgpu_node_me me;
    int exiting;
    uint32_t env_limit[VGPU_MAX_DEVICES];
    uint64_t last_active_ns;
    is_capturing_fn is_capturing;
    exchange_mode_fn exchange_mode;
    uint32_t clock_started;
    struct lim_cost_table costs;
    struct cdev dev[VGPU_MAX_DEVICES];
} G;

static uint32_t g_init_state; /* 0 none, 1 in progress, 2 done (per process) */
static pid_t g_init_pid;

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

uint64_t vgpu_compute_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void spin_lock(uint32_t *l)
{
    while (__atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE) != 0)
        while (LD(l) != 0)
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#else
            ;
#endif
}

static void spin_unlock(uint32_t *l)
{
    __atomic_store_n(l, 0u, __ATOMIC_RELEASE);
}

static uint64_t random_nonzero(void)
{
    uint64_t x = vgpu_compute_now() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&G;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x ? x : 1u;
}

/* ---- configuration: environment once, then the region ------------------------------------- */

static void env_config(uint32_t *policy, uint32_t *priority)
{
    const char *v;
    uint32_t all = 0;
    int all_ok = 1;
    unsigned i;

    *policy = LIM_POLICY_DEFAULT;
    v = getenv("GPU_CORE_UTILIZATION_POLICY");
    if (v != NULL && lim_parse_policy(v, policy) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "GPU_CORE_UTILIZATION_POLICY='%s' is not a core policy (valid: "
                 "default, force, disable); using force, which holds every limit", v);
        *policy = LIM_POLICY_FORCE;
    }
    *priority = LIM_PRIORITY_LOW;
    v = getenv("CUDA_TASK_PRIORITY");
    if (v != NULL && lim_parse_priority(v, priority) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "CUDA_TASK_PRIORITY='%s' is not a priority (valid: 0 high, "
                 "1 low); using 1 (low)", v);
        *priority = LIM_PRIORITY_LOW;
    }
    v = getenv("CUDA_DEVICE_SM_LIMIT");
    if (v != NULL && lim_parse_pct(v, &all) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "CUDA_DEVICE_SM_LIMIT='%s' is not a percentage (valid: 0..100, "
                 "0 = no limit); devices without a valid CUDA_DEVICE_SM_LIMIT_<i> get 1%%", v);
        all = 1;
        all_ok = 0;
    }
    for (i = 0; i < VGPU_MAX_DEVICES; i++) {
        char name[40];
        uint32_t one = 0;
        snprintf(name, sizeof name, "CUDA_DEVICE_SM_LIMIT_%u", i);
        v = getenv(name);
        G.env_limit[i] = all;
        if (v == NULL)
            continue;
        if (lim_parse_pct(v, &one) == 0) {
            G.env_limit[i] = one;
            continue;
        }
        vgpu_log(VGPU_LOG_ERROR, "%s='%s' is not a percentage (valid: 0..100, 0 = no limit); "
                 "using %s", name, v, all_ok && all ? "CUDA_DEVICE_SM_LIMIT" : "1%");
        if (!all_ok || all == 0)
            G.env_limit[i] = 1;
    }
}

/* The container block: configured once per container (first process or the agent). */
static void container_config(struct vgpu_compute_container *c)
{
    uint32_t policy, priority;
    uint32_t expect = 0;

    env_config(&policy, &priority);
    if (__atomic_compare_exchange_n(&c->config_state, &expect, 1u, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        ST(&c->priority, priority);
        ST(&c->core_policy, policy);
        ST(&c->container_id, random_nonzero());
        __atomic_store_n(&c->config_state, 2u, __ATOMIC_RELEASE);
    } else {
        for (int spin = 0; spin < 100000 && LD(&c->config_state) != 2u; spin++)
            sched_yield();
    }
    G.policy = LD(&c->core_policy);
    G.priority = LD(&c->priority);
    G.container_id = LD(&c->container_id);
    if (G.container_id == 0) /* configured by an agent that gave no id */
        G.container_id = random_nonzero();
}

/* A device block: limit_pct from this process's environment if nobody configured it yet. */
static void device_config(struct vgpu_compute_device *b, unsigned ordinal)
{
    uint32_t expect = 0;
    if (__atomic_compare_exchange_n(&b->config_state, &expect, 1u, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        ST(&b->limit_pct, G.env_limit[ordinal]);
}

static void bind_device_block(struct cdev *c, unsigned ordinal)
{
    int idx = -1;

    if (G.have_region && (int)ordinal < vgpu_core.ndev)
        idx = vgpu_core.entry[ordinal];
    if (idx < 0 && G.have_region)
        idx = vgpu_region_find_device(G.region.r, c->uuid);
    if (idx >= 0) {
        struct vgpu_compute_device *b = &G.region.r->devices[idx].compute;
        device_config(b, ordinal);
        c->region_idx = idx;
        __atomic_store_n(&c->blk, b, __ATOMIC_RELEASE);
    }
}

static void find_proc_slot(void)
{
    if (G.have_region && G.proc == NULL)
        G.proc = __atomic_load_n(&vgpu_core.slot, __ATOMIC_ACQUIRE);
}

/* ---- the clock thread: DVFS correction (limiter.h) ---------------------------------------- */

/* One clock-thread sample of a device: fold the SM clock into the DVFS correction and the
 * utilisation into the busy feedback, and publish their product. */
static void clock_sample(struct cdev *c, uint64_t t, uint32_t mhz, int have_mhz, uint32_t util,
                         uint32_t power_mw)
{
    struct vgpu_compute_device *blk = __atomic_load_n(&c->blk, __ATOMIC_ACQUIRE);
    uint32_t limit = LD(&c->limit);
    uint64_t charged = LD(&blk->charged_ns);
    uint64_t scale;

    if (have_mhz) {
        c->sat_mhz = lim_sat_update(c->sat_mhz, mhz, util);
        if (c->sat_mhz == 0) { /* never seen saturated: estimate from power (limiter.h) */
            uint32_t e = lim_sat_estimate(mhz, power_mw, util, c->limit_mw);
            /* half way to each sample: settled within a few samples (the phase after a
             * limit change is measured from 0.7 s on), noise averaged by the pacer */
            if (e != 0)
                c->est_mhz = c->est_mhz == 0 ? e : (uint32_t)(((uint64_t)c->est_mhz + e) / 2u);
        }
        /* f_sat, and the clock kernels run at now: the cost estimates bring each sample from
         * its clock to f_sat (limiter.h, clock section) */
        uint32_t ref = c->sat_mhz ? c->sat_mhz : c->est_mhz, n = LD(&c->nclocks);
        ST(&c->ref_mhz, ref);
        ST(&c->clocks[n % CLOCKS],
           (t / 1000000u) << 16 | (lim_clock_tag(mhz, util, ref) & 0xffffu));
        __atomic_store_n(&c->nclocks, n + 1u, __ATOMIC_RELEASE);
    }
    /* Busy feedback: windows of FEEDBACK_WINDOW_NS, only while paced at one limit and alone on
     * the GPU (no other container present, not yielding) for FEEDBACK_SETTLE_NS already:
     * utilisation is an average over the driver's last period and lags a change. */
    if (limit == 0 || LD(&c->track) || LD(&c->yield) || limit != c->fb_limit ||
        (c->win_t0 != 0 && charged < c->win_c0) /* bound to the region's block meanwhile */) {
        c->fb_since = t;
        c->fb_limit = limit;
        c->win_t0 = 0;
        c->fb_down = 0;
    } else if (t - c->fb_since >= FEEDBACK_SETTLE_NS) {
        if (c->win_t0 == 0) {
            c->win_t0 = c->win_prev = t;
            c->win_c0 = charged;
            c->win_busy = 0;
        } else {
            c->win_busy += (t - c->win_prev) * util / 100u;
            c->win_prev = t;
            /* a window holds many of the longest kernels: with 100-ms kernels paced at 30 %,
             * a 0.5-s window holds one or two, and its busy share swings by half */
            uint64_t win = lim_pacer_increment(LD(&c->longest), limit) * FEEDBACK_WINDOW_KERNELS;
            win = win < FEEDBACK_WINDOW_NS ? FEEDBACK_WINDOW_NS
                  : win > FEEDBACK_WINDOW_MAX_NS ? FEEDBACK_WINDOW_MAX_NS : win;
            if (t - c->win_t0 >= win) {
                uint32_t k = lim_busy_feedback(c->fb_ppm, c->win_busy, charged - c->win_c0,
                                               t - c->win_t0);
                /* down only when two windows in a row ask for it: NVML's utilisation averages
                 * over its own period, which can still hold the idle time before a start or a
                 * limit change (read as "over-estimated", it would overshoot the limit) */
                if (k >= c->fb_ppm || c->fb_down)
                    c->fb_ppm = k;
                c->fb_down = k < c->fb_ppm;
                c->win_t0 = c->win_prev = t;
                c->win_c0 = charged;
                c->win_busy = 0;
            }
        }
    }
    if (c->fb_ppm < LIM_FEEDBACK_MIN_PPM || c->fb_ppm > LIM_FEEDBACK_MAX_PPM)
        c->fb_ppm = LIM_SCALE_ONE;
    scale = c->fb_ppm;
    ST(&c->scale_ppm, (uint32_t)scale);
    ST(&blk->cost_scale_ppm, (uint32_t)scale);
    ST(&blk->sat_mhz, c->sat_mhz);
}

static void *clock_main(void *arg)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml_init_fn init = NULL;
    nvml_by_uuid_fn by_uuid = NULL;
    nvml_clock_fn clk = NULL;
    nvml_util_fn util = NULL;
    nvml_mw_fn power = NULL, power_limit = NULL;
    uint64_t next;
    int d, any = 0;

    (void)arg;
    if (h != NULL && vgpu_real_dlsym != NULL) {
        *(void **)&init = vgpu_real_dlsym(h, "nvmlInit_v2");
        *(void **)&by_uuid = vgpu_real_dlsym(h, "nvmlDeviceGetHandleByUUID");
        *(void **)&clk = vgpu_real_dlsym(h, "nvmlDeviceGetClockInfo");
        *(void **)&util = vgpu_real_dlsym(h, "nvmlDeviceGetUtilizationRates");
        *(void **)&power = vgpu_real_dlsym(h, "nvmlDeviceGetPowerUsage");
        *(void **)&power_limit = vgpu_real_dlsym(h, "nvmlDeviceGetEnforcedPowerLimit");
    }
    if (init == NULL || by_uuid == NULL || util == NULL || init() != NVML_SUCCESS) {
        vgpu_log(VGPU_LOG_INFO, "compute: NVML unavailable (%s); costs are not corrected for "
                 "clock changes (DVFS) nor by the GPU's busy time", h == NULL ?
                 "no libnvidia-ml.so.1" : "missing entry points or nvmlInit failed");
        return NULL;
    }
    if (clk == NULL)
        vgpu_log(VGPU_LOG_INFO, "compute: NVML has no nvmlDeviceGetClockInfo; costs are not "
                 "corrected for clock changes (DVFS)");
    for (d = 0; d < G.ndev; d++) {
        char name[VGPU_UUID_TEXT];
        nvmlDevice_t dev = NULL;
        vgpu_uuid_text(G.dev[d].uuid, name);
        if (by_uuid(name, &dev) == NVML_SUCCESS) {
            unsigned int mw = 0;
            struct vgpu_compute_device *blk = __atomic_load_n(&G.dev[d].blk, __ATOMIC_ACQUIRE);
            G.dev[d].nvml = dev;
            if (power_limit != NULL && power_limit(dev, &mw) == NVML_SUCCESS)
                G.dev[d].limit_mw = mw;
            /* an earlier process of the container saw this GPU saturated: start from there */
            G.dev[d].sat_mhz = LD(&blk->sat_mhz);
            any = 1;
        }
    }
    if (!any) {
        vgpu_log(VGPU_LOG_INFO, "compute: NVML knows none of this process's GPUs by UUID; costs "
                 "are not corrected for clock changes (DVFS) nor by the GPU's busy time");
        return NULL;
    }
    next = vgpu_compute_now();
    for (;;) {
        next += CLOCK_PERIOD_NS;
        sleep_until(next);
        if (vgpu_compute_now() > next + 10 * CLOCK_PERIOD_NS)
            next = vgpu_compute_now();
        for (d = 0; d < G.ndev; d++) {
            struct cdev *c = &G.dev[d];
            unsigned int mhz = 0, mw = 0;
            nvmlUtilization_t ut = {0, 0};
            int have_mhz;
            if (c->nvml == NULL || util(c->nvml, &ut) != NVML_SUCCESS)
                continue;
            have_mhz = clk != NULL && clk(c->nvml, NVML_CLOCK_SM_ID, &mhz) == NVML_SUCCESS;
            if (power == NULL || power(c->nvml, &mw) != NVML_SUCCESS)
                mw = 0;
            clock_sample(c, vgpu_compute_now(), mhz, have_mhz, ut.gpu > 100u ? 100u : ut.gpu, mw);
        }
    }
    return NULL;
}

/* Started once, by the ticker, as soon as some device of the process may be paced: NVML's
 * initialisation can take a while and must not stop the heartbeats. */
static void start_clock_thread(void)
{
    pthread_t t;
    pthread_attr_t attr;

    G.clock_started = 1;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, clock_main, NULL) != 0)
        vgpu_log(VGPU_LOG_INFO, "compute: cannot start the clock thread; costs are not corrected "
                 "for clock changes (DVFS)");
    pthread_attr_destroy(&attr);
}

/* ---- the ticker ---------------------------------------------------------------------------- */

/* A turn in one word for the gate: period, offset and length in 10-us units (the longest period,
 * 640 ms, is 64,000 of them). */
#define TURN_UNIT_NS 10000u

static uint64_t turn_pack(struct lim_turn t)
{
    if (t.len_ns == 0)
        return 0;
    return (uint64_t)(t.period_ns / TURN_UNIT_NS) << 32 | (uint64_t)(t.off_ns / TURN_UNIT_NS) << 16 |
           (t.len_ns / TURN_UNIT_NS);
}

static struct lim_turn turn_unpack(uint64_t w)
{
    struct lim_turn t = {(uint32_t)(w >> 16 & 0xffffu) * TURN_UNIT_NS,
                         (uint32_t)(w & 0xffffu) * TURN_UNIT_NS,
                         (uint32_t)(w >> 32 & 0xffffu) * TURN_UNIT_NS};
    return t;
}

/* The period class this process's longest recent kernels ask for at `limit`. */
static uint32_t turn_class(const struct cdev *c, uint32_t limit)
{
    return lim_turn_class(LD(&c->longest), limit);
}

/* This container's turn on the device among the paced containers active there (limiter.h). */
static uint64_t turn_of(const struct cdev *c, uint64_t now, uint32_t limit)
{
    struct lim_turn_member m[LIM_TURN_MAX];
    uint32_t n = vgpu_node_paced(G.node, c->uuid, G.container_id, now, m, LIM_TURN_MAX - 1);

    if (n == 0)
        return 0;
    m[n].id = G.container_id;
    m[n].limit_pct = limit;
    m[n].period_class = turn_class(c, limit);
    return turn_pack(lim_turn_window(m, n + 1, G.container_id));
}

static void poll_locked(struct cdev *c);
static _Thread_local int t_ticker; /* this thread is the ticker (its capture mode is relaxed) */

/* A high-priority process whose measured work runs late (not complete past its estimated end:
 * it may wait in a synchronise behind other containers' queued work): the ticker polls the
 * measurements itself, since no launch comes to do it.  Work on time needs nothing: the busy
 * horizon its launches published covers it. */
static int still_busy(struct cdev *c, uint64_t now)
{
    uint32_t n;
    uint64_t due = 0;

    static _Thread_local CUcontext current; /* the ticker's own current context */

    if (!t_ticker || G.priority != LIM_PRIORITY_HIGH || LD(&c->limit) || LD(&c->count) == 0)
        return 0;
    spin_lock(&c->lock);
    /* the events belong to pool_ctx: make it the ticker's current context for the queries */
    if (c->pool_ctx != NULL && c->pool_ctx != current && vgpu_cu.cuCtxSetCurrent != NULL &&
        vgpu_cu.cuCtxSetCurrent(c->pool_ctx) == CUDA_SUCCESS)
        current = c->pool_ctx;
    if (current != c->pool_ctx) { /* no context to query in: say nothing */
        spin_unlock(&c->lock);
        return 0;
    }
    poll_locked(c);
    n = c->count;
    if (n > 0)
        due = c->ring[(c->head + n - 1u) % RING].due;
    spin_unlock(&c->lock);
    return n > 0 && due < now;
}

static int watching(void)
{
    int d;

    if (G.priority != LIM_PRIORITY_HIGH || G.node == NULL)
        return 0;
    for (d = 0; d < G.ndev; d++)
        if (LD(&G.dev[d].track) && LD(&G.dev[d].count) > 0)
            return 1;
    return 0;
}

/* Between ticks, every WATCH_NS: a high-priority process with late work beside lows keeps its
 * claim (its node slot's activity) WATCH_NS + the claim grace ahead, so that lows do not slip
 * work in while it waits for its own. */
static void watch(uint64_t now)
{
    int d;

    if (G.priority != LIM_PRIORITY_HIGH || G.node == NULL || G.exiting)
        return;
    for (d = 0; d < G.ndev; d++) {
        struct cdev *c = &G.dev[d];
        if (c->node_slot >= 0 && LD(&c->track) && still_busy(c, now) &&
            LD(&G.node->slots[c->node_slot].active_ns) < now + WATCH_NS)
            vgpu_node_touch(G.node, c->node_slot, now + 2u * WATCH_NS);
    }
}

static void tick(uint64_t now)
{
    uint32_t w = __atomic_fetch_and(&vgpu_compute_word, ~VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
    int gate = 0;
    int may_pace = G.policy == LIM_POLICY_FORCE;
    int d;

    if (w & VGPU_COMPUTE_TOUCHED)
        G.last_active_ns = now;
    find_proc_slot();
    if (G.proc != NULL)
        ST(&G.proc->compute.active_ns, G.last_active_ns);
    if (G.have_region) {
        G.policy = LD(&G.region.r->compute.core_policy);
        G.priority = LD(&G.region.r->compute.priority);
        G.me.priority = G.priority;
    }
    for (d = 0; d < G.ndev; d++) {
        struct cdev *c = &G.dev[d];
        struct vgpu_compute_device *b;
        struct vgpu_node_census census = {0, 0, 0};
        struct lim_view v;
        struct lim_verdict r;
        uint32_t flags = 0;

        if (c->region_idx < 0)
            bind_device_block(c, (unsigned)d);
        b = c->blk;
        uint64_t active = LD(&c->horizon) > G.last_active_ns ? LD(&c->horizon) : G.last_active_ns;
        if (still_busy(c, now) && active < now + 2u * WATCH_NS)
            active = now + 2u * WATCH_NS; /* late work: claimed until the next watch */
        if (G.node != NULL && !G.exiting) {
            if (c->node_slot < 0 ||
                vgpu_node_beat(G.node, c->node_slot, &G.me, now, active,
                               (LD(&c->limit) ? VGPU_NODE_FLAG_LIMITED : 0u) |
                                   (LD(&c->yield) ? VGPU_NODE_FLAG_YIELDING : 0u),
                               VGPU_NODE_TURN(LD(&c->limit),
                                              turn_class(c, LD(&c->limit)))) != 0) {
                c->node_slot = vgpu_node_claim(G.node, &G.me, c->uuid, now);
                if (c->node_slot >= 0)
                    vgpu_node_beat(G.node, c->node_slot, &G.me, now, active, 0, 0);
            }
            vgpu_node_census(G.node, c->uuid, G.container_id, now, &census);
        }
        v.policy = G.policy;
        v.priority = G.priority;
        v.limit_pct = LD(&b->limit_pct);
        v.agent_limit_pct = LD(&b->agent_limit_pct);
        if ((v.limit_pct > 0 && v.limit_pct < 100) ||
            (v.agent_limit_pct > 0 && v.agent_limit_pct < 100))
            may_pace = 1;
        v.agent_yield = LD(&b->agent_yield);
        v.node_known = G.node != NULL && c->node_slot >= 0;
        v.others_high = census.high;
        v.others_low = census.low;
        r = lim_decide(&v);
        if (r.limit_pct != LD(&c->limit) || r.yield != LD(&c->yield))
            vgpu_log(VGPU_LOG_INFO, "compute: device %d: %s, others active: %u high %u low "
                     "(%u present) -> %s%u%%%s", d, v.node_known ? "node region" : "no node region",
                     census.high, census.low, census.present, r.limit_pct ? "paced to " : "not paced ",
                     r.limit_pct, r.yield ? ", yielding" : "");
        ST(&c->limit, r.limit_pct);
        ST(&c->yield, r.yield);
        ST(&c->forced, v.agent_yield == LIM_AGENT_YIELD ? 1u : 0u);
        {
            /* a low watches its claiming-high neighbours on every launch (wait_claims) */
            uint32_t slots[CLAIM_MAX], n = 0, i;
            if (G.node != NULL && c->node_slot >= 0 && G.priority == LIM_PRIORITY_LOW &&
                G.policy != LIM_POLICY_DISABLE && v.agent_yield != LIM_AGENT_RUN)
                n = vgpu_node_claimers(G.node, c->uuid, G.container_id, now, slots, CLAIM_MAX);
            for (i = 0; i < n; i++)
                ST(&c->claim[i], slots[i]);
            ST(&c->nclaim, n);
        }
        ST(&c->turn, v.node_known && r.limit_pct && !r.yield ? turn_of(c, now, r.limit_pct) : 0u);
        if (LD(&c->turn))
            flags |= VGPU_COMPUTE_FLAG_TURNS;
        ST(&c->track, census.present > 0 ? 1u : 0u);
        ST(&c->sharing, census.high + census.low > 0 ? 1u : 0u);
        if (census.high + census.low)
            flags |= VGPU_COMPUTE_FLAG_SHARING;
        if (r.limit_pct)
            flags |= VGPU_COMPUTE_FLAG_LIMITED;
        if (r.yield)
            flags |= VGPU_COMPUTE_FLAG_YIELDING;
        if (!v.node_known)
            flags |= VGPU_COMPUTE_FLAG_NODE_UNKNOWN;
        ST(&b->effective_pct, r.limit_pct);
        ST(&b->flags, flags);
        if (r.limit_pct || r.yield || census.present > 0)
            gate = 1;
    }
    if (may_pace && !G.clock_started && G.ndev > 0)
        start_clock_thread();
    if (gate)
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&vgpu_compute_word, ~VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
}

static void *ticker_main(void *arg)
{
    uint64_t next = vgpu_compute_now();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    (void)arg;
    /* the ticker's own driver calls (still_busy) must never touch another thread's capture */
    t_ticker = G.exchange_mode == NULL || G.exchange_mode(&mode) == CUDA_SUCCESS;
    for (;;) {
        next += TICK_NS;
        /* only a high-priority process beside others wakes between ticks (watch) */
        for (uint64_t t = vgpu_compute_now(); watching() && t + WATCH_NS < next;
             t = vgpu_compute_now()) {
            sleep_until(t + WATCH_NS);
            watch(vgpu_compute_now());
        }
        sleep_until(next);
        uint64_t now = vgpu_compute_now();
        if (now > next + 10 * TICK_NS) /* stopped (SIGSTOP, suspend): do not catch up */
            next = now;
        tick(now);
    }
    return NULL;
}

/* ---- initialisation (once per process; again in a forked child) --------------------------- */

static void init_devices(void)
{
    int n = 0;
    int d;

    if (vgpu_cu.cuDeviceGetCount == NULL || vgpu_cu.cuDeviceGetCount(&n) != CUDA_SUCCESS)
        n = 0;
    if (n > (int)VGPU_MAX_DEVICES)
        n = (int)VGPU_MAX_DEVICES;
    for (d = 0; d < n; d++) {
        struct cdev *c = &G.dev[d];
        CUdevice dev = 0;
        CUuuid u;
        memset(&u, 0, sizeof u);
        if (vgpu_cu.cuDeviceGet != NULL)
            (void)vgpu_cu.cuDeviceGet(&dev, d);
        if (vgpu_cu.cuDeviceGetUuid_v2 != NULL)
            (void)vgpu_cu.cuDeviceGetUuid_v2(&u, dev);
        else if (vgpu_cu.cuDeviceGetUuid != NULL)
            (void)vgpu_cu.cuDeviceGetUuid(&u, dev);
        memcpy(c->uuid, u.bytes, 16);
        c->region_idx = -1;
        c->node_slot = -1;
        c->blk = &c->local;
        c->scale_ppm = LIM_SCALE_ONE;
        c->fb_ppm = LIM_SCALE_ONE;
        ST(&c->local.limit_pct, G.env_limit[d]);
        bind_device_block(c, (unsigned)d);
    }
    G.ndev = n;
}

static void init_once(void)
{
    char why[512];
    const char *path;
    void *h;
    pthread_t t;
    pthread_attr_t attr;
    struct vgpu_compute_container local_container;

    memset(&G.dev, 0, sizeof G.dev);
    G.pid = getpid();
    G.proc = NULL;
    G.node = NULL;
    G.clock_started = 0;
    G.last_active_ns = vgpu_compute_now();

    /* The container's region, as the memory side (core.c) opened it. */
    G.have_region = vgpu_core_ready() == 0 && vgpu_core.region.r != NULL;
    if (G.have_region)
        G.region = vgpu_core.region;
    if (G.have_region) {
        container_config(&G.region.r->compute);
    } else {
        memset(&local_container, 0, sizeof local_container);
        container_config(&local_container);
    }

    G.me.owner = random_nonzero();
    G.me.container_id = G.container_id;
    G.me.priority = G.priority;
    G.me.pid = (uint32_t)getpid();
    path = getenv("GPUWARDEN_NODE_REGION");
    if (path == NULL || path[0] == '\0')
        path = "/dev/shm/gpuwarden-node";
    if (strcmp(path, "off") != 0) {
        G.node = vgpu_node_open(path, why, sizeof why);
        if (G.node == NULL)
            vgpu_log(VGPU_LOG_ERROR, "compute: %s; sharing is unknown, so low-priority work is "
                     "held to its gpucores", why);
    }

    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    G.is_capturing = NULL;
    G.exchange_mode = NULL;
    if (h != NULL && vgpu_real_dlsym != NULL) {
        *(void **)&G.is_capturing = vgpu_real_dlsym(h, "cuStreamIsCapturing");
        *(void **)&G.exchange_mode = vgpu_real_dlsym(h, "cuThreadExchangeStreamCaptureMode");
    }

    init_devices();
    tick(vgpu_compute_now());

    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, ticker_main, NULL) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "compute: cannot start the ticker thread; every launch takes "
                 "the gate with the limits of now");
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
    }
    pthread_attr_destroy(&attr);
    __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_READY, __ATOMIC_RELEASE);
}

static void at_exit(void)
{
    /* Leave the node region at once: neighbours stop yielding or sharing without waiting for
     * the heartbeat to go stale. */
    int d;
    if (G.node == NULL || G.pid != getpid())
        return;
    G.exiting = 1;
    for (d = 0; d < G.ndev; d++)
        if (G.dev[d].node_slot >= 0)
            vgpu_node_release(G.node, G.dev[d].node_slot, G.me.owner);
}

static void atfork_child(void)
{
    /* The ticker did not survive the fork and the parent's events are not ours. */
    __atomic_store_n(&vgpu_compute_word, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&g_init_state, 0u, __ATOMIC_RELAXED);
}

static void ensure_init(void)
{
    uint32_t s = __atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE);
    uint32_t expect = 0;

    if (s == 2u && g_init_pid == getpid())
        return;
    if (__atomic_compare_exchange_n(&g_init_state, &expect, 1u, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        static int atfork_done;
        if (!atfork_done) {
            atfork_done = 1;
            pthread_atfork(NULL, NULL, atfork_child);
            atexit(at_exit);
        }
        init_once();
        g_init_pid = getpid();
        __atomic_store_n(&g_init_state, 2u, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != 2u)
        sched_yield();
}

/* ---- measurements ---------------------------------------------------------------------------- */

static CUevent pool_get(struct cdev *c, CUcontext ctx)
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

static void pool_put(struct cdev *c, CUevent e)
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
static uint32_t clock_tag(const struct cdev *c, uint64_t launched)
{
    uint32_t n = __atomic_load_n(&c->nclocks, __ATOMIC_ACQUIRE), i, tag = 0;
    uint64_t from = launched / 1000000u;

    for (i = 0; i < CLOCKS && i < n; i++) {
        uint64_t r = LD(&c->clocks[(n - 1u - i) % CLOCKS]);
        uint32_t mhz = (uint32_t)(r & 0xffffu);
        tag = mhz > tag ? mhz : tag;
        if ((r >> 16) <= from) /* the reading before the launch: the clock it started at */
            break;
    }
    return tag;
}

/* Takes finished measurements off the ring (oldest first), under c->lock. */
static void poll_locked(struct cdev *c)
{
    while (c->count > 0) {
        struct pend *p = &c->ring[c->head];
        CUresult q;
        float ms = 0.0f;

        if (__atomic_load_n(&p->mark, __ATOMIC_ACQUIRE) == UINT64_MAX)
            return; /* its launch is still under way (leave() not reached yet) */
        q = vgpu_cu.cuEventQuery(p->end);
        if (q == CUDA_ERROR_NOT_READY)
            return;
        if (q == CUDA_SUCCESS && p->key != 0 && vgpu_cu.cuEventElapsedTime(&ms, p->start, p->end) == CUDA_SUCCESS
            && ms >= 0.0f) {
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
            lim_cost_sample(&G.costs, p->key, ns, clock_tag(c, p->launched),
                            LD(&c->ref_mhz));
        }
        if (p->mark > LD(&c->completed))
            ST(&c->completed, p->mark);
        pool_put(c, p->start);
        pool_put(c, p->end);
        p->live = 0;
        c->head = (c->head + 1) % RING;
        ST(&c->count, c->count - 1);
        ST(&c->poll_due, c->count > 0 ? c->ring[c->head].due : 0);
    }
}

static int capturing(CUstream stream)
{
    int status = 0;
    CUresult rc;

    if (G.is_capturing == NULL)
        return 0;
    rc = G.is_capturing(stream, &status);
    /* IMPLICIT: the legacy stream while another thread captures; the launch itself takes part in
     * (and fails with) that capture, so the gate keeps out of it */
    return (rc == CUDA_SUCCESS && status != 0) || rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

static uint64_t add_waited(struct cdev *c, uint64_t from)
{
    uint64_t w = vgpu_compute_now() - from;
    ADD(&c->blk->waited_ns, w);
    if (G.proc != NULL)
        ADD(&G.proc->compute.waited_ns, w);
    return w;
}

/* Waits for this container's turn (limiter.h) to launch `cost` ns of estimated work; returns
 * the time after the wait.  Gives up when the turns, the limit or the yield verdict change. */
static uint64_t wait_turn(struct cdev *c, uint64_t cost, uint64_t from)
{
    uint64_t now = from;

    for (;;) {
        uint64_t turn = LD(&c->turn), hz = LD(&c->horizon), w;
        struct lim_turn t = turn_unpack(turn);

        if (turn == 0 || LD(&c->limit) == 0 || LD(&c->yield))
            break;
        w = lim_turn_wait(t, now, hz > now ? hz - now : 0, cost);
        if (w == 0)
            break;
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
        sleep_until(now + (w > SLEEP_CHUNK_NS ? SLEEP_CHUNK_NS : w));
        now = vgpu_compute_now();
    }
    if (now != from)
        add_waited(c, from);
    return now;
}

/* The capture mode of the calling thread, swapped to relaxed before the gate's first own driver
 * call and restored when the gate is done: another thread may be capturing a graph in the
 * global mode, which forbids this thread's cuEventQuery (it would invalidate that capture); the
 * gate's calls never touch a capturing stream.  Most launches make no driver call of the gate's
 * own and pay nothing for this. */
struct capture_mode {
    CUstreamCaptureMode mode;
    int relaxed;
};

static void relax(struct capture_mode *m)
{
    if (m->relaxed || G.exchange_mode == NULL)
        return;
    m->mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    m->relaxed = G.exchange_mode(&m->mode) == CUDA_SUCCESS;
}

static void restore(struct capture_mode *m)
{
    if (m->relaxed)
        (void)G.exchange_mode(&m->mode);
}

/* Polls the measurements when the oldest one is due (its estimated end has passed) or `force`:
 * one cuEventQuery per due measurement instead of one per launch. */
static void poll_due(struct cdev *c, uint64_t now, int force, struct capture_mode *m)
{
    if (LD(&c->count) == 0 || (!force && now < LD(&c->poll_due)))
        return;
    relax(m);
    spin_lock(&c->lock);
    poll_locked(c);
    spin_unlock(&c->lock);
}

/* Whether a launch must wait now: the agent says yield, or a claiming high is busy (its slot's
 * activity, published on each of its launches, within VGPU_NODE_CLAIM_GRACE_NS).  The
 * ticker's yield verdict without a claimer list (no node region) holds as it is. */
static int must_wait(struct cdev *c, uint64_t now)
{
    uint32_t slots[CLAIM_MAX], n = LD(&c->nclaim), i;

    if (LD(&c->forced))
        return 1;
    if (n == 0 || G.node == NULL)
        return LD(&c->yield) != 0;
    for (i = 0; i < n && i < CLAIM_MAX; i++)
        slots[i] = LD(&c->claim[i]);
    return vgpu_node_claimed(G.node, slots, n < CLAIM_MAX ? n : CLAIM_MAX, now);
}

/* The gate proper, for a launch of `key` on `stream` on device `d` (vgpu_compute_enter). */
static void gate(struct vgpu_gate *g, uint64_t key, CUstream stream, CUdevice d, uint64_t now,
                 struct capture_mode *m)
{
    struct cdev *c = &G.dev[d];
    uint64_t est, raw = 0, wait, outstanding;
    CUcontext ctx = NULL;
    uint32_t limit;
    int known = 0;
    int want_sample;
    int bounded;

    if (must_wait(c, now)) {
        if (G.proc != NULL)
            ST(&G.proc->compute.yielding, 1u);
        do {
            __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
            sleep_until(vgpu_compute_now() + (LD(&c->nclaim) ? CLAIM_POLL_NS : SLEEP_CHUNK_NS));
        } while (must_wait(c, vgpu_compute_now()));
        if (G.proc != NULL)
            ST(&G.proc->compute.yielding, 0u);
        add_waited(c, now);
        now = vgpu_compute_now();
    }
    limit = LD(&c->limit);
    ADD(&c->blk->launches, 1u);
    g->dev = d;

    /* The queue bound: no more than QUEUE_NS of estimated work ahead of the GPU, for paced
     * work and for low-priority work on a shared GPU (so that it can yield at short notice). */
    bounded = limit != 0 || G.priority == LIM_PRIORITY_LOW;
    outstanding = LD(&c->submitted) - LD(&c->completed);
    poll_due(c, now, bounded && outstanding > QUEUE_NS, m);
    outstanding = LD(&c->submitted) - LD(&c->completed);
    while (bounded && outstanding > QUEUE_NS && LD(&c->count) > 0) {
        sleep_until(vgpu_compute_now() + 100000u);
        poll_due(c, 0, 1, m);
        outstanding = LD(&c->submitted) - LD(&c->completed);
    }

    est = lim_cost_estimate(&G.costs, key, &known, &raw);
    if (limit != 0) {
        /* Charged: the GPU time the launch would take on the saturated GPU (the estimate, DVFS
         * corrected) times the busy feedback. */
        uint64_t charge = lim_scale_cost(est, LD(&c->scale_ppm));
        uint64_t turn = LD(&c->turn), longest = LD(&c->longest);
        int turns = turn != 0;
        /* the longest recent kernel sets the turn period class; it decays by 1/1024 a launch */
        ST(&c->longest, charge > longest ? charge : longest - longest / 1024u);
        if (turns) {
            /* Taking turns: the window holds the share; the pacer, with a period of credit,
             * only keeps the long-run share of kernels longer than the window. */
            now = wait_turn(c, charge, now);
            wait = lim_pacer_book(&c->blk->tat_ns, now, charge, limit,
                                  turn_unpack(turn).period_ns);
        } else if (LD(&c->sharing)) {
            wait = lim_pacer_book_bursty(&c->blk->tat_ns, now, charge, limit,
                                         TOLERANCE_SHARED_NS);
        } else {
            wait = lim_pacer_book(&c->blk->tat_ns, now, charge, limit, TOLERANCE_NS);
        }
        if (wait > 0) {
            uint64_t until = now + wait;
            for (uint64_t t = now; t < until && LD(&c->limit) != 0 && !LD(&c->yield);
                 t = vgpu_compute_now())
                sleep_until(until - t > SLEEP_CHUNK_NS ? t + SLEEP_CHUNK_NS : until);
            add_waited(c, now);
            now = vgpu_compute_now();
            if (turns)
                now = wait_turn(c, charge, now);
        }
        ADD(&c->blk->charged_ns, raw); /* as measured: the busy feedback compares it with NVML */
    }
    g->est = est;
    {
        /* The busy horizon tells neighbours this process still has work queued (a process
         * waiting in a synchronize is active as long as its GPU work runs).  A launch of unknown
         * cost counts as HORIZON_UNKNOWN_NS: better a neighbour yields a little long than a
         * starting high-priority job is seen idle while its first kernels wait. */
        uint64_t hz = LD(&c->horizon);
        hz = (hz > now ? hz : now) + (known ? est : HORIZON_UNKNOWN_NS);
        ST(&c->horizon, hz);
        /* a high one tells its low neighbours at once how long it keeps the GPU busy: its
         * estimated work, plus the lows' own queue bound, which may run ahead of it */
        if (G.priority == LIM_PRIORITY_HIGH && G.node != NULL && c->node_slot >= 0)
            vgpu_node_touch(G.node, c->node_slot, hz + QUEUE_NS);
    }

    /* Measure: unknown or young signatures, one in SAMPLE_EVERY, and whenever the queue bound
     * needs fresh news. */
    /* ... and whenever QUEUE_NS / 4 of estimated work went by unmeasured: the queue bound
     * counts what is outstanding from the newest finished measurement, so a coarser grain
     * would drain the queue (and idle the GPU) before the bound lets a launch go */
    want_sample = !known || ADD(&c->nlaunch, 1u) % SAMPLE_EVERY == 0 ||
                  LD(&c->submitted) - LD(&c->sampled_at) >= QUEUE_NS / 4u;
    if (!want_sample)
        return;
    relax(m);
    if (vgpu_cu.cuCtxGetCurrent == NULL || vgpu_cu.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
        ctx == NULL)
        return;
    spin_lock(&c->lock);
    if (c->count < RING) {
        uint32_t i = (c->head + c->count) % RING;
        struct pend *p = &c->ring[i];
        p->start = pool_get(c, ctx);
        p->end = pool_get(c, ctx);
        /* busy (or unknown): `start` fires when the work ahead ends, the sample is the kernel's
         * own; only an idle stream's sample has the launch's CPU time in it */
        p->chained = vgpu_cu.cuStreamQuery == NULL || vgpu_cu.cuStreamQuery(stream) != CUDA_SUCCESS;
        if (p->start != NULL && p->end != NULL &&
            vgpu_cu.cuEventRecord(p->start, stream) == CUDA_SUCCESS) {
            p->key = key;
            p->live = 1;
            p->launched = now;
            p->due = LD(&c->horizon);
            ST(&c->sampled_at, LD(&c->submitted));
            g->sample = (int)i;
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
        struct pend *p = &c->ring[i];
        if (__atomic_load_n(&p->mark, __ATOMIC_ACQUIRE) != UINT64_MAX &&
            vgpu_cu.cuEventRecord(p->start, stream) == CUDA_SUCCESS) {
            p->chained = 1; /* a full ring: the stream has work ahead */
            p->key = key;
            p->launched = now;
            p->due = LD(&c->horizon);
            ST(&c->sampled_at, LD(&c->submitted));
            g->sample = (int)i;
            __atomic_store_n(&p->mark, UINT64_MAX, __ATOMIC_RELEASE);
        }
    }
    spin_unlock(&c->lock);
    g->t0 = vgpu_compute_now();
}

void vgpu_compute_enter(struct vgpu_gate *g, uint64_t key, CUstream stream)
{
    uint32_t w;
    uint64_t now;
    CUdevice d = -1;
    struct cdev *c;
    struct capture_mode mode = {CU_STREAM_CAPTURE_MODE_RELAXED, 0};

    g->dev = -1;
    g->sample = -1;
    g->est = 0;
    ensure_init();
    w = LD(&vgpu_compute_word);
    if (!(w & VGPU_COMPUTE_TOUCHED))
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
    if (vgpu_cu.cuCtxGetDevice == NULL || vgpu_cu.cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0 ||
        d >= G.ndev)
        return;
    c = &G.dev[d];
    now = vgpu_compute_now();
    if (!(w & VGPU_COMPUTE_TOUCHED) && G.node != NULL && c->node_slot >= 0)
        vgpu_node_touch(G.node, c->node_slot, now); /* neighbours see us at their next tick */
    if (!(w & VGPU_COMPUTE_GATE) || (!LD(&c->limit) && !LD(&c->yield) && !LD(&c->track)) ||
        capturing(stream))
        return;

    gate(g, key, stream, d, now, &mode);
    restore(&mode);
}

void vgpu_compute_leave(struct vgpu_gate *g, CUstream stream, CUresult rc)
{
    struct cdev *c;
    struct pend *p;
    uint64_t mark;

    if (g->dev < 0)
        return;
    c = &G.dev[g->dev];
    mark = ADD(&c->submitted, g->est) + g->est;
    if (g->sample < 0)
        return;
    p = &c->ring[g->sample];
    p->cpu_ns = vgpu_compute_now() - g->t0;
    spin_lock(&c->lock);
    if (rc != CUDA_SUCCESS || vgpu_cu.cuEventRecord(p->end, stream) != CUDA_SUCCESS) {
        /* Nothing to measure: record the end right after the start so the slot completes. */
        p->key = 0;
        (void)vgpu_cu.cuEventRecord(p->end, stream);
    }
    __atomic_store_n(&p->mark, mark, __ATOMIC_RELEASE);
    spin_unlock(&c->lock);
}
