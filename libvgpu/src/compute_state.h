/* compute_state.h: the compute limiter's per-process state, shared by its modules (compute.c:
 * initialisation and configuration; gate.c: the launch gate; measure.c: the GPU-time
 * measurements; ticker.c: the ticker thread; clock.c: the NVML clock thread).  Defined in
 * compute.c.  The hooks see only compute.h.
 *
 * Fields marked "atomic" are read and written with LD/ST/ADD (relaxed) by several threads;
 * the others belong to the thread named beside them. */
#ifndef VGPU_COMPUTE_STATE_H
#define VGPU_COMPUTE_STATE_H

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "compute.h"
#include "cuda_api.h"
#include "limiter.h"
#include "node.h"
#include "nvml_api.h"
#include "region.h"
#include "vgpu_compute.h"

#define VGPU_CS_RING      32u /* measurements in flight per device */
#define VGPU_CS_POOL      (2u * VGPU_CS_RING + 4u) /* spare events per device */
#define VGPU_CS_CLAIM_MAX 8u  /* claiming-high processes a low watches per device */
#define VGPU_CS_CLOCKS    8u  /* NVML clock readings kept per device (the last 0.8 s) */
#define VGPU_CS_CHARGED   32u /* charged_ns and launches readings kept per device, one a
                                * tick (3.2 s) */

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

typedef CUresult (*vgpu_is_capturing_fn)(CUstream stream, int *status);
typedef CUresult (*vgpu_exchange_mode_fn)(CUstreamCaptureMode *mode);

/* One measurement of a launch's GPU time (measure.c). */
struct vgpu_cpend {
    CUevent start;
    CUevent end;
    uint64_t key;
    uint64_t mark;    /* the device's `submitted` after this launch */
    uint64_t due;     /* when its work is estimated to end (the busy horizon): not polled before */
    uint64_t behind;  /* the device's `behind` when it was taken: what `due` already includes */
    uint64_t cpu_ns;  /* CPU time of the real launch call */
    uint32_t chained; /* the queue was busy when `start` was recorded */
    uint32_t live;
    uint64_t launched; /* CLOCK_MONOTONIC of the launch: its clock tag reads from there on */
    uint64_t provisional_ns;  /* vgpu_gate's: a launch of unknown cost's charge, to settle */
    uint32_t provisional_pct; /* ... at this limit, 0 none */
    uint64_t provisional_raw; /* ... and what it added to charged_ns */
    uint32_t unknown; /* a launch of unknown cost under a queue bound (in unknown_in_flight) */
};

/* One CUDA device of the process. */
struct vgpu_cdev {
    uint32_t limit;   /* verdict: pace to this share, 0 not paced (atomic) */
    uint32_t share;   /* verdict: the share it takes turns by, 0 none (lim_verdict; atomic) */
    uint32_t capped;  /* verdict: that share is a cap, not a weight (atomic) */
    uint32_t rest;    /* verdict: that share is what the others' leave (atomic) */
    uint32_t yield;   /* verdict: wait (atomic) */
    uint32_t forced;  /* the agent's override says yield (atomic) */
    uint32_t nclaim;  /* a low's claiming-high neighbours, slots in claim[] (atomic; ticker) */
    uint32_t claim[VGPU_CS_CLAIM_MAX];
    uint32_t track;   /* others share the GPU: keep the busy horizon even when not paced */
    uint32_t hold;    /* a low one with gpucores alone, not paced: gated for its queue's depth
                       * (ALONE_QUEUE_NS) only, so that a newcomer does not wait behind it */
    uint32_t sharing; /* another container is active on the GPU: pace in bursts (atomic) */
    uint32_t light;   /* paced and using little of its share: claims like a high (lim_light;
                       * atomic; ticker) */
    uint32_t use_x100; /* the container's recent use of the GPU (lim_use_avg; ticker only) */
    uint32_t waited_x100; /* ... the share of the time it waited in the gate (lim_waited_avg) */
    uint64_t claim_from, claim_until; /* a light one's claim: since when it has run without a
                                       * break, and until when it holds (gate.c; atomic) */
    uint64_t claim_charged; /* ... the container's charged_ns when it began (atomic) */
    uint64_t claim_gap;     /* ... how long it had nothing queued before it began (`gap`) */
    struct lim_idle idle; /* ... and its idle share's averages (lim_idle_avg; ticker only) */
    uint64_t use_charged, use_waited, use_at; /* its charged_ns, waited_ns at use_at, 0: anew */
    uint64_t use_since; /* when the averages started, 0 not yet */
    uint64_t light_at;  /* when it was last found light (ticker only) */
    uint64_t light_left; /* when it last stopped being light, 0 never (atomic) */
    uint64_t run_backoff; /* its last hold for a claim that ran on: lim_run_backoff (ticker) */
    uint64_t wait_mark; /* a wait in the gate in progress: counted in waited_ns up to here, 0
                         * none (atomic; one waiting thread at a time keeps it: gate.c) */
    uint64_t turn;    /* paced containers take turns: vgpu_turn_pack(), 0 none (atomic) */
    uint32_t split;   /* the container's processes that split its window here (lim_split_wait),
                       * 0 or 1 none (atomic) ... */
    uint32_t split_rank;                    /* ... this one's part (atomic) ... */
    uint32_t split_slot[LIM_SPLIT_MAX];     /* ... their process slots by part (atomic) */
    uint64_t longest; /* charged cost of the longest recent launch, decaying (atomic) */
    uint64_t longest_key; /* ... the launch signature that set it (atomic) */
    uint32_t longest_light; /* ... while the container was light (lim_longest; atomic) */
    uint64_t period_longest; /* the same, settled by lim_period_samples: the turn class (atomic) */
    uint64_t period_longest_key;   /* ... (atomic) */
    uint32_t period_longest_light; /* ... (atomic) */
    uint64_t others_longest; /* the longest of the other paced containers' own, as of the last
                              * tick: the class while period_longest is 0 (lim_period_longest;
                              * atomic) */
    uint32_t asked_class;    /* the turn class it asked for at its last tick in the turns, which
                              * it keeps near a class's line (lim_turn_class_kept; atomic) */
    uint32_t scale_ppm; /* correction of charged costs: the busy feedback (atomic) */
    uint32_t ref_mhz;   /* f_sat: measured, else estimated from power, 0 none (atomic) */
    uint64_t clocks[VGPU_CS_CLOCKS]; /* clock-thread readings: ms << 16 | lim_clock_tag (atomic) */
    uint32_t nclocks;   /* readings ever written (atomic) */
    /* the clock thread's own (limiter.h: DVFS correction, busy feedback) */
    nvmlDevice_t nvml;  /* NULL: none */
    uint32_t sat_mhz;   /* SM clock seen on the saturated GPU, 0 none yet */
    uint32_t est_mhz;   /* f_sat estimated from power while sat_mhz is 0 (limiter.h), 0 none */
    uint32_t limit_mw;  /* the GPU's enforced power limit, 0 unknown */
    uint32_t fb_ppm;    /* busy-feedback factor */
    uint32_t fb_down;   /* the last window asked for a lower factor */
    uint32_t fb_judged; /* a window said something: fb_ppm is no longer the prior */
    uint32_t fb_limit;  /* the limit the feedback conditions started with */
    uint64_t fb_since;  /* when the feedback conditions (paced, alone) began, 0 not now */
    uint64_t win_t0, win_c0, win_busy, win_prev; /* the current feedback window */
    uint64_t win_l0;    /* ... the device's launches when it opened */
    uint32_t samples;   /* NVML's utilisation samples: 0 not known yet, 1 read, 2 not given */
    unsigned long long samp_seen; /* the newest sample's timestamp (CLOCK_REALTIME us), 0 none */
    uint64_t chg_t[VGPU_CS_CHARGED], chg_v[VGPU_CS_CHARGED]; /* charged_ns, one reading a tick */
    uint64_t chg_l[VGPU_CS_CHARGED]; /* ... and the device's launches at the same reading */
    uint32_t chg_n;
    uint64_t horizon; /* when this process's estimated queued work on the device ends (atomic) */
    uint64_t gap;     /* how long it had nothing queued there before its latest launch came
                       * (lim_split_busy_until; atomic) */
    uint32_t flags;   /* VGPU_COMPUTE_FLAG_* */
    int region_idx;   /* device entry, -1: not in the region yet, `local` is used */
    uint8_t uuid[16];
    int node_slot;
    struct vgpu_compute_device *blk;
    struct vgpu_compute_device local;
    /* measurements, under `lock` (a spin flag; held for a few driver calls at most) */
    uint32_t lock;
    struct vgpu_cpend ring[VGPU_CS_RING];
    uint32_t head;
    uint32_t count;
    CUevent pool[VGPU_CS_POOL];
    uint32_t npool;
    CUcontext pool_ctx;
    uint64_t poll_due;  /* `due` of the oldest measurement in the ring (under `lock`) */
    uint64_t behind;    /* how far the busy horizon was moved on for work found running late
                         * (measure.c, running_late; under `lock`) */
    uint64_t submitted; /* estimated ns launched through the gate */
    uint64_t sampled_at; /* `submitted` when the newest measurement was taken */
    uint64_t completed; /* `mark` of the newest measurement seen complete */
    uint64_t completed_at; /* when `completed` last advanced (the poll's time, not the GPU's:
                            * the work after it had started by then) */
    uint32_t claiming;  /* a high one's launches between publishing their claim and adding to
                         * `submitted` (the ticker's early release waits for none) */
    uint64_t min_cpu_ns; /* smallest CPU time of a sampled launch (rises by 1/256 a sample) */
    uint32_t unknown_in_flight; /* measurements in the ring of launches of unknown cost under a
                                 * queue bound, paced or not (under `lock`; read without it) */
    uint32_t stalled;     /* a wait for measured work gave up (gate.c, GPU_WAIT_MAX_NS): none
                           * waits again until a measurement completes (atomic) */
    uint64_t nlaunch;     /* launches of known signatures */
    uint64_t next_sample; /* the one of them measured next (lim_sample_due) */
};

struct vgpu_cstate {
    pid_t pid; /* the process this state belongs to (fork resets it) */
    int ndev;
    uint32_t policy;
    uint32_t priority;
    uint32_t gate_wait_cfg; /* enum lim_wait, GPUWARDEN_GATE_WAIT (default auto) */
    uint32_t gate_wait;     /* how the gate waits now: LIM_WAIT_SLEEP or _YIELD (atomic; the
                             * ticker's under auto, pressure.c) */
    uint32_t waiter_tid;    /* under auto, the thread that waited in the gate last (atomic) */
    uint64_t container_id;
    struct vgpu_region_handle region;
    int have_region;
    struct vgpu_region_proc *proc; /* this process's slot, once found */
    struct vgpu_node_region *node;
    struct vgpu_node_me me;
    int exiting;
    uint32_t env_limit[VGPU_MAX_DEVICES];
    uint64_t last_active_ns;
    vgpu_is_capturing_fn is_capturing;
    vgpu_exchange_mode_fn exchange_mode;
    uint32_t clock_started;
    uint32_t tick_nudge; /* 0: the ticker sleeps to its next tick and a new light claim may wake
                          * it (vgpu_ticker_nudge); 1: nudged, or not asleep (atomic, a futex) */
    struct lim_cost_table costs;
    struct vgpu_cdev dev[VGPU_MAX_DEVICES];
};

extern struct vgpu_cstate vgpu_cs;

/* When the claims of the device's claiming neighbours (claim[], the ticker's list) end after
 * `now`, 0 none; *all_light (may be NULL) as vgpu_node_claim_end's.  The gate waits until then
 * (gate.c, must_wait); the ticker holds a container's averages over a tick they covered. */
static inline uint64_t vgpu_cs_claim_end(const struct vgpu_cdev *c, uint64_t now, int *all_light)
{
    uint32_t slots[VGPU_CS_CLAIM_MAX], n = __atomic_load_n(&c->nclaim, __ATOMIC_RELAXED), i;

    if (all_light != NULL)
        *all_light = 0;
    if (n == 0 || vgpu_cs.node == NULL)
        return 0;
    n = n < VGPU_CS_CLAIM_MAX ? n : VGPU_CS_CLAIM_MAX;
    for (i = 0; i < n; i++)
        slots[i] = __atomic_load_n(&c->claim[i], __ATOMIC_RELAXED);
    return vgpu_node_claim_end(vgpu_cs.node, slots, n, now, all_light);
}

/* Binds a device to its block in the container region once the region has it (compute.c). */
void vgpu_cs_bind_device(struct vgpu_cdev *c, unsigned ordinal);
/* Finds this process's slot in the region once the memory side claimed it (compute.c). */
void vgpu_cs_find_proc_slot(void);

static inline void vgpu_cs_sleep_until(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* A short spin lock (the measurement ring's bookkeeping, a few loads and stores, and the event
 * queries of vgpu_measure_poll_locked).  After CS_LOCK_SPINS pauses a waiter yields its CPU: on
 * a node whose cores are all busy the holder may be preempted, and a waiter spinning through
 * its whole time slice would only keep the holder off the CPU longer. */
#define CS_LOCK_SPINS 256u

static inline void vgpu_cs_lock(uint32_t *l)
{
    uint32_t spins = 0;

    while (__atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE) != 0)
        while (LD(l) != 0) {
            if (++spins < CS_LOCK_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
            } else {
                sched_yield();
            }
        }
}

static inline void vgpu_cs_unlock(uint32_t *l)
{
    __atomic_store_n(l, 0u, __ATOMIC_RELEASE);
}

#endif /* VGPU_COMPUTE_STATE_H */
