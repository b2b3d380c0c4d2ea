/* The compute controller, pure: no CUDA, no clock, no I/O.  Every function takes the time it
 * needs as an argument so tests drive it with a fake clock (tests/compute/limiter_driver.c).
 * Its functions are `lim_`-prefixed, not `vgpu_` like the rest of libvgpu/src: the prefix marks
 * what is pure and linked into the test driver alone; all are hidden (-fvisibility=hidden).
 *
 *  - pacer:     a GCRA ("virtual scheduling") pacer over estimated GPU time.  One 64-bit word
 *               (the theoretical arrival time) lives in the container's shared region, so every
 *               process of the container books against the same budget with one CAS loop.
 *               Credit is bounded by the tolerance: an idle container cannot save up time.
 *  - cost:      per-launch-signature GPU time estimates: the smallest of the last samples.  A
 *               sample is stretched, never shrunk, by other work on the GPU (another context's
 *               time slice, another container's queued kernels), so the smallest of a window
 *               is the kernel's own time as soon as one sample in the window ran unhindered.
 *               When the last few samples all took longer than every earlier one, the kernel
 *               itself got slower (the GPU clocked down): the estimate follows them.
 *  - turns:     windows of a period for paced containers that share a GPU, so that one context
 *               at a time has work queued (no time-slicing between them).
 *  - clock:     the DVFS correction of charged costs (measured or power-estimated f_sat).
 *  - decide:    the policy/priority table (docs/compute.md) as one function.
 *  - light:     whether a paced container uses so little of its share that it claims the GPU
 *               while busy instead of taking turns (what it leaves goes to the others).
 *  - parse:     the compute environment variables, strict, with the safe-side fallbacks.
 */
#ifndef VGPU_LIMITER_H
#define VGPU_LIMITER_H

#include <stddef.h>
#include <stdint.h>

/* ---- pacer ------------------------------------------------------------------------------- */

/* Books one launch of `cost_ns` estimated GPU time at `limit_pct` (1..100) against `*tat`
 * (atomically; shared memory) and returns how long the caller must wait before launching, in
 * ns.  `tolerance_ns` is the burst a container may launch without waiting (the credit bound). */
uint64_t lim_pacer_book(uint64_t *tat, uint64_t now_ns, uint64_t cost_ns, uint32_t limit_pct,
                        uint64_t tolerance_ns);

/* Settles a launch that was paced at a provisional charge (its cost was not known yet: it was
 * charged the running mean of all samples, 0 at the very start) once its measurement gives
 * `cost_ns`: moves `tat` by the difference of the two increments at `limit_pct` (atomically;
 * never below 0).  Without it, a container paced from its first launch gets its first kernels
 * free: 100-ms kernels at 70 % read ~78 % over the first second. */
void lim_pacer_settle(uint64_t *tat, uint64_t charged_ns, uint64_t cost_ns, uint32_t limit_pct);

/* Wall time a launch of `cost_ns` occupies in the pace at `limit_pct`: cost * 100 / limit. */
uint64_t lim_pacer_increment(uint64_t cost_ns, uint32_t limit_pct);

/* lim_pacer_book for a container that shares its GPU: once a launch has to wait, it waits until
 * the container has `burst_ns` of pace in credit again (`tat` = now + tolerance - burst; at most
 * the tolerance) instead of only down to the tolerance, so the launches that follow go in a burst
 * of up to `burst_ns` of pace.  The long-run share is the same; the GPU switches between the
 * sharing contexts once per burst instead of once per launch (a switch between two contexts
 * costs the H200 tens of us).  A light container's tolerance is longer than its bursts
 * (LIM_LIGHT_BURST_NS): it may spend a request's worth of credit at once, but once over it waits
 * for one burst's worth, not the whole. */
uint64_t lim_pacer_book_bursty(uint64_t *tat, uint64_t now_ns, uint64_t cost_ns,
                               uint32_t limit_pct, uint64_t tolerance_ns, uint64_t burst_ns);

/* ---- turns: time division between paced containers sharing a GPU ---------------------------
 * When two paced containers have kernels queued at the same time, the GPU time-slices between
 * their contexts, and each switch costs it time (H200, 30 % + 70 %: the 70 % container got
 * 59.5 % with per-launch pacing, 62.5 % with bursts).  So paced containers that share a GPU take
 * turns instead: every LIM_TURN_PERIOD_NS of CLOCK_MONOTONIC (one clock for the whole node) is
 * cut into one window per paced container, in the order of container ids, each as long as the
 * container's share scaled to fill the period (shares that add up to less than 100 split the
 * rest in proportion, lim_share_scaled; more than 100, each gives up in proportion).  A container
 * launches only inside its window, and only work its estimates say ends before the window does
 * (give or take half a kernel), so that one context at a time has work on the GPU.  Every
 * container computes the same windows from the node region, with no lock and no hand-over: a
 * dead container's window just stays idle until its slot goes stale. */
#define LIM_TURN_PERIOD_NS 40000000ull /* the shortest period: class 0 */
#define LIM_TURN_CLASSES   5u  /* period = LIM_TURN_PERIOD_NS << class: 40, 80, 160, 320, 640 ms */
#define LIM_TURN_KERNELS   4u  /* a window holds at least this many of a member's longest kernels */
#define LIM_TURN_MAX       64u /* paced containers per GPU taken into account */

/* The period grows with the longest kernels: a launch goes only while its end falls at most half
 * its cost past its window's end (lim_turn_wait), so a window gives up and takes about as much at
 * its edges, and a window of a few long kernels would still turn them over coarsely.  Each member
 * asks for the smallest class whose window holds LIM_TURN_KERNELS of its longest kernels; all
 * take the largest class asked. */
uint32_t lim_turn_class(uint64_t longest_ns, uint32_t limit_pct);

/* lim_turn_class, but a member asking for class `current` keeps it (or the class between)
 * while its longest kernel, 1/LIM_TURN_CLASS_MARGIN longer, would still ask for it: a class
 * moves every member's windows, and kernels whose time sits on a class's line moved it on
 * every launch (H100, stop 48: 16384² matmuls at 30 %, 11.999 ms asking for 160 ms and 12.010
 * for 320, the longest kernel decaying between the two).  A longer kernel raises it at once.
 * The margin is small, as the decay is slow: at 1/8, in a 70 of two processes of 2-ms kernels,
 * the one launching a kernel every ~32 ms got 0.027-0.028 of the simulated GPU in three runs
 * where it gets 0.03 or more (test_a_container_s_processes_split_its_window_on_sim.py; not
 * traced: most likely a longer period its first sliced samples asked for, kept longer). */
#define LIM_TURN_CLASS_MARGIN 64u
uint32_t lim_turn_class_kept(uint64_t longest_ns, uint32_t limit_pct, uint32_t current);

/* The longest kernel a member's class goes by: its own (`own_ns`, settled: lim_longest_next),
 * or, while it has none yet, the longest of its neighbours' in the turns (`others_ns`).  A
 * window's first kernel shares the GPU with what its predecessor's last one leaves (up to half
 * a kernel, lim_turn_wait), so a window sized for no kernel at all (class 0) beside long
 * kernels loses most of itself to them; and that member's own kernels, sliced so, read long,
 * one window each, until it has the samples that settle its own: a 30 % newcomer of 12-ms
 * kernels beside a 70 % one of the same took turns in 24-ms windows of an 80-ms period for
 * ~0.4 s, one step in each (H100, stop 47), where 160 ms is its own class. */
uint64_t lim_period_longest(uint64_t own_ns, uint64_t others_ns);

/* The longest recent kernel: the charge of the longest launch lately, decaying by
 * 1/LIM_LONGEST_DECAY a launch.  A young signature (`settled` 0: fewer samples than its first
 * launches are measured on) does not raise it: its first sample may hold the module's loading (a
 * longer period for seconds: 500-us kernels of two paced containers lost their disjoint windows
 * for ~2 s on the sim after one such sample).  One set while the
 * container was light (`light`: out of the turns, its kernels sliced with the work its
 * neighbours run between its claims) is followed down by the signature that set it: a light
 * newcomer's 12-ms kernels read 20-30 ms on the H100, and when it took turns the decay held a
 * 640-ms period for seconds (400 ms of its first second waited for its window).  Otherwise a
 * fall only decays: samples sliced in the turns are the GPU's own (a container's processes
 * time-slice at their parts' edges), and a period that followed every estimate down moved
 * every member's windows as the samples varied (sim, two processes of 12-ms kernels
 * synchronised each: their 70 got 0.60-0.61 of the GPU where it gets 0.65).
 * A process keeps two: the one that sets the class (`period_longest`), and the one the light
 * rules, the split of a window and the busy feedback's window go by (`longest`).  Where the
 * container was light lately (lim_period_samples), the first is settled only by a signature with
 * LIM_PERIOD_SAMPLES samples: a class moves every member's windows, and such a container's first
 * samples are stretched twice over.  Light, its kernels are sliced with its neighbours' work;
 * back in the turns, a window's first kernel shares the GPU with the tail its predecessor left
 * (up to half a kernel, lim_turn_wait), the second often with some of it.  A newcomer that was
 * light while it idled took all of its first four so: its 10-ms kernels read 12.4-14 ms on the
 * sim, which at 30 % asks for a 320-ms period where 10 ms asks for 160, and the decay held it
 * about a second (its first second 0.22-0.26 of the GPU in 3 runs of 18; waiting for 8 samples,
 * 0.267-0.298 in 12).  Eight span later kernels of two of its windows.  Elsewhere it waits for
 * no more than `longest` does: for all, 8 cost a 70 of two processes of 12-ms kernels beside a
 * 30 (sim, 2-ms slices costing 0.4 ms a switch) 0.03 of the GPU (0.600-0.657 for 0.623-0.664),
 * its samples by the eighth sliced by its sibling's (24 ms) and its period 320-640 ms.  Until
 * then it asks for its neighbours' class (lim_period_longest), not class 0. */
#define LIM_LONGEST_DECAY  1024u
#define LIM_PERIOD_SAMPLES 8u
#define LIM_PERIOD_LIGHT_NS 1000000000ull
struct lim_longest {
    uint64_t ns;    /* 0: none yet */
    uint64_t key;   /* the launch signature that set it */
    uint32_t light; /* set while the container was light: it may fall */
};
struct lim_longest lim_longest_next(struct lim_longest l, uint64_t key, uint64_t charge_ns,
                                    int settled, uint32_t light);
/* The samples a signature needs to raise the period's longest kernel: LIM_PERIOD_SAMPLES where
 * the container is light (`light`) or stopped being light less than LIM_PERIOD_LIGHT_NS before
 * `now_ns` (`light_left_ns`, 0 never), else `young` (those the other longest kernel needs). */
uint32_t lim_period_samples(uint32_t light, uint64_t light_left_ns, uint64_t now_ns,
                            uint32_t young);

struct lim_turn_member {
    uint64_t id;           /* container id, nonzero */
    uint32_t limit_pct;    /* 1..99 */
    uint32_t period_class; /* lim_turn_class of its longest kernels */
    uint32_t capped;       /* its share is a cap (`force`), not a weight */
    uint32_t rest;         /* it has no gpucores: its share is what the others' leave
                            * (lim_rest_share) */
    uint64_t longest_ns;   /* its own longest kernel (0: not known yet; lim_period_longest) */
};

struct lim_turn {
    uint32_t off_ns;    /* window start within the period */
    uint32_t len_ns;    /* window length; 0: no turns (fewer than two paced containers) */
    uint32_t period_ns; /* LIM_TURN_PERIOD_NS << the members' largest class */
};

/* Adds `m` to a set of `*n` members with distinct ids (an id already there keeps the largest
 * limit, class and longest kernel of both); entries with limit 0 or >= 100, and new ids beyond
 * `max`, are left out. */
void lim_turn_merge(struct lim_turn_member *set, uint32_t *n, uint32_t max,
                    struct lim_turn_member m);

/* The window of container `me` among the paced containers `m` (any order; an id may repeat, its
 * largest limit and class count; `me` must be one of them; entries with limit 0 or >= 100 are
 * ignored).  Windows are in proportion to the shares; where they add up to less than 100, a
 * capped member's window is its share of the period and the weighted ones split the rest in
 * proportion (lim_share_scaled); capped ones alone leave the rest idle. */
struct lim_turn lim_turn_window(const struct lim_turn_member *m, uint32_t n, uint64_t me);

/* How long a launch of `cost_ns` must wait for its turn at `now_ns`, 0 = go, when the caller's
 * queued work (its estimate) ends `queued_ns` from now.  A launch goes inside the window when it
 * ends no later than half its cost past the window's end; a launch longer than the whole window
 * goes at the start of one with nothing queued, in the first half of the window (the pacer keeps
 * its long-run share). */
uint64_t lim_turn_wait(struct lim_turn t, uint64_t now_ns, uint64_t queued_ns, uint64_t cost_ns);

/* A container's processes in its window.  Its processes share its window, and where two of them
 * have kernels queued at once the GPU time-slices between their contexts (slices of about 2 ms
 * on an H100: a 256² matmul waited at most 2.1 ms beside 100-ms kernels), so a kernel longer
 * than a slice is cut by its sibling's slices and its measured span holds them: the container is
 * charged its siblings' time twice (H100, 16384² bf16, ~13-ms kernels, 30 + a 70 of two
 * processes: the 70 one got 54 % of the GPU where one process got 69 %).  So, while one of
 * them has kernels of LIM_SPLIT_LONGEST_NS or more, the `n` processes of a container that launch
 * in turns (at most LIM_SPLIT_MAX; those with short kernels too, whose slices cut the long ones
 * as much) split its window into even parts, one each in slot order (`rank`), and launch in
 * their own part, or in a sibling's while that sibling has nothing queued and is not waiting for
 * its part (bit `rank` of `idle`): a sibling that launches now and then leaves its part to the
 * others.  Shorter kernels rarely meet a slice's end, and the smallest of their samples is clean
 * (simulated GPU, 1-ms slices: 0.2-ms kernels 0.27 + 0.70 with two processes), so where all are
 * short the window is not split. */
#define LIM_SPLIT_LONGEST_NS 1000000ull
#define LIM_SPLIT_MAX        8u

/* Part `rank` of `n` of window `t` (t itself when n < 2). */
struct lim_turn lim_turn_split(struct lim_turn t, uint32_t rank, uint32_t n);

/* lim_turn_wait for process `rank` of the `n` that split window `t`: a launch goes in the run of
 * parts from the one `now` is in that are its own or idle ones', as lim_turn_wait would in a
 * window that long; else it waits for its own part. */
uint64_t lim_split_wait(struct lim_turn t, uint32_t rank, uint32_t n, uint32_t idle,
                        uint64_t now_ns, uint64_t queued_ns, uint64_t cost_ns);

/* Until when a process of a split window counts as busy to its siblings (not idle in
 * lim_split_wait) when its queued work ends at `horizon_ns` by its estimates, and it had nothing
 * queued for `gap_ns` before its latest launch came.  One that came back within a kernel of its
 * work's end (a loop synchronising each kernel: ~0.2 ms) is held busy one of its longest recent
 * kernels past its horizon (`longest_ns`, LIM_SPLIT_LONGEST_NS at least): a sibling polling for
 * an idle part found one in those gaps, and in a kernel cut by time slices that ran past its
 * estimate, and ran in the part beside its owner, time-sliced, to the part's end (H100, torch
 * 16384² matmuls synchronised each, ~11 ms, a 70 of two processes beside a 30: 21 % of the time
 * two kernels at once, each pair 26-29 ms, the 70 at 50 % of the GPU).  One that came back
 * later (it sleeps between requests) is idle at its horizon, so its part goes on to the others
 * at once. */
uint64_t lim_split_busy_until(uint64_t horizon_ns, uint64_t longest_ns, uint64_t gap_ns);

/* ---- clock (DVFS) correction ------------------------------------------------------------------
 * A power-capped GPU runs slower clocks under full load (H200, 4096² bf16 matmul: 1515 MHz at
 * 700 W) than under a limited load (1980 MHz), so a kernel takes less GPU time when its container
 * is held back: 30 % of the GPU's time then buys 35 % of the unlimited throughput.  The pacer
 * charges a kernel the time it would take on the saturated GPU instead:
 *     charged = measured * (f_now / f_sat) ^ LIM_CLOCK_ALPHA     (never less than measured)
 * where f_sat is the SM clock this process saw while the GPU was saturated (utilisation >=
 * LIM_SAT_UTIL_PCT) and alpha = 0.6, the H200's fit (4096² bf16 matmul: 175 us at 1980 MHz,
 * 205.5 us at 1515 MHz; 1/2 before, which left 4096² at 10.3 / 31.1 / 51.8 / 72.7 % and 32768²
 * at 9.6 / 31.0 / 52.0 % of the saturated throughput at 10 / 30 / 50, all a little above).
 * Without a saturated sample (f_sat 0) nothing is corrected.
 *
 * f_now is the clock each *sample* ran at (lim_clock_tag; the cost estimates correct every
 * sample as it comes in, lim_cost_sample), not the clock at the time of a launch: the estimate
 * is the smallest of several samples, and samples from different clocks compare only once each
 * is brought to f_sat (H200, 32768² bf16 matmuls: samples of 91 ms from 1980 MHz, corrected
 * with the 1552 MHz the GPU ran at 70 %, gave 77.2 % of the saturated throughput there). */
#define LIM_SAT_UTIL_PCT 95u
#define LIM_SCALE_ONE    1000000u /* scale in parts per million */

#define LIM_CLOCK_ALPHA  0.6

/* (f_now / f_sat) ^ LIM_CLOCK_ALPHA in ppm, at least LIM_SCALE_ONE (at most 16x); LIM_SCALE_ONE
 * when either is 0. */
uint32_t lim_clock_scale_ppm(uint32_t f_now_mhz, uint32_t f_sat_mhz);

/* One NVML sample (SM clock, GPU utilisation %) folded into f_sat.  Saturated samples below
 * f_sat move it half way down at once (the clock drops within a few hundred ms of the GPU
 * saturating; a low f_sat charges more, the safe side); samples above move it up by 1/8; the
 * first one sets it; unsaturated samples leave it. */
uint32_t lim_sat_update(uint32_t f_sat_mhz, uint32_t f_now_mhz, uint32_t util_pct);

/* What one NVML sample (SM clock, GPU utilisation) says of the clock kernels ran at: the clock
 * when it is at least f_sat (`ref_mhz`: a loaded GPU never runs below its saturated clock), or,
 * before f_sat is known, when the GPU was at least LIM_EST_MIN_UTIL_PCT busy; 0 (nothing)
 * otherwise: an idle GPU's clock (H200: 345 MHz) is no kernel's. */
uint32_t lim_clock_tag(uint32_t f_mhz, uint32_t util_pct, uint32_t ref_mhz);

/* f_sat estimated before the GPU was ever seen saturated (a container paced from its first
 * launch on): one NVML sample of the SM clock, the power draw, the GPU's utilisation and its
 * enforced power limit.  The GPU draws a static part whatever its load (LIM_EST_STATIC_PERMILLE
 * of the limit) plus a part in proportion to its busy time, so saturated it would draw about
 * p_sat = static + (power - static) * 100 / util; when that exceeds the limit, the clock drops
 * until it fits: f_sat = f_now * (limit / p_sat)^LIM_EST_CLOCK_EXP, at least f_now / 2.  Both
 * constants are fits to the H200 (700 W) at 1980 MHz, where power went linearly with busy time
 * from a static part of 130-210 W (bf16 matmuls of 1024² to 4096², an 8-layer encoder at batch
 * 8), and 4096² matmuls, saturated, ran at 1573-1637 MHz.  Until issue 18 the static part was
 * 0 (all power counted as busy) with an exponent of 2/3: the same at 60-70 % busy, but at 23 %
 * busy, 289 W (2048² matmuls synchronised after each, saturated at 1810 MHz) it predicted
 * 1345 MHz, charged ~20 % too much, and a 30 % limit gave 23.6 %.  Below
 * LIM_EST_MIN_UTIL_PCT the reading says too little (H200, 1024² matmul at 7 % busy and 158 W).
 * Returns f_now when no capping is expected, 0 when the sample says nothing (util below
 * LIM_EST_MIN_UTIL_PCT or already saturated, or a reading missing). */
#define LIM_EST_STATIC_PERMILLE 200u
#define LIM_EST_CLOCK_EXP 0.9
#define LIM_EST_MIN_UTIL_PCT 20u
uint32_t lim_sat_estimate(uint32_t f_now_mhz, uint32_t power_mw, uint32_t util_pct,
                          uint32_t limit_mw);

/* cost scaled by ppm (rounding down, saturating). */
uint64_t lim_scale_cost(uint64_t cost_ns, uint32_t scale_ppm);

/* ---- busy feedback ------------------------------------------------------------------------------
 * The slow outer loop over the estimates: while a paced container is alone on its GPU, the GPU's
 * busy time (NVML utilisation) over a window is the container's own, and the factor on charged
 * costs moves half way to busy / charged (the estimates before any factor) each window, both
 * ways:
 *  - up, when the GPU was busier than charged (estimates of short kernels that miss the GPU's
 *    per-launch time; work gpuwarden does not manage), to (busy - 1 % of the window) / charged
 *    (NVML's utilisation has whole-percent resolution), at most LIM_FEEDBACK_MAX_PPM;
 *  - down, when the GPU was less busy than charged (samples of kernels launched into an idle
 *    stream carry launch latency the GPU does not spend busy), to busy / charged, at least
 *    LIM_FEEDBACK_MIN_PPM: a launch-bound application under a limit it does not reach must not
 *    be held back by an over-estimate;
 *  - not at all within that one point, or when the window charged less than
 *    LIM_FEEDBACK_MIN_SHARE_PCT of it (lim_feedback_judges).
 * The process's first window it judges (`whole`) moves the factor the whole way: the factor
 * before it is a prior of 1, no measurement.  Half way there, a batch-8 encoder at 70 % on the
 * H100 read 77-78 % busy for its first second (its kernels' measured time sits ~12 % under
 * NVML's busy time), the factor reaching 1.055 only at its end.  Returns the new factor. */
#define LIM_FEEDBACK_MAX_PPM       2000000u
#define LIM_FEEDBACK_MIN_PPM       500000u
#define LIM_FEEDBACK_MIN_SHARE_PCT 3u
uint32_t lim_busy_feedback(uint32_t k_ppm, uint64_t busy_ns, uint64_t charged_ns,
                           uint64_t window_ns, int whole);
/* Whether a window of `window_ns` that charged `charged_ns` says anything (above). */
int lim_feedback_judges(uint64_t charged_ns, uint64_t window_ns);

/* ---- cost estimates ---------------------------------------------------------------------- */

#define LIM_COST_SLOTS   1024u /* power of two */
#define LIM_COST_SAMPLES 16u   /* the estimate is the smallest of the last this many */
#define LIM_COST_PROBES  8u
/* ... unless the newest samples that span LIM_COST_RISE_SPAN_NS, LIM_COST_RISE_SAMPLES of them at
 * least, all took LIM_COST_RISE_PCT longer than the smallest before them: then it is the
 * smallest of those.  Samples stretched by other work come and go; a clock that dropped (a
 * power-capped GPU loaded more: H200, 32768² bf16 matmuls of 91 ms at 1980 MHz ran at 1552 MHz
 * at a 70 % limit) slows every kernel from then on.  Measured one by one, 100-ms kernels filled
 * the 16-sample window for 2.3 s after such a drop (a limit phase's length), and the estimate
 * kept their time from the higher clock: 77.2 % at 70.
 * The span: a few kernels in a row are stretched where a neighbour's light claim (~50 ms at
 * most) and the turns that form after it run beside them.  With the rule on the newest four
 * alone, a 70 % container's 10-ms kernels read 13.4-15 ms four in a row as a light newcomer
 * became paced beside it (sim, in ~1 run of 15): its estimate, and with it its longest kernel,
 * rose by 40 %, and the newcomer, going by its neighbour's longest until it knew its own, took
 * a 320-ms period where 160 ms was due.  Short kernels need the whole window: their samples
 * move by more than a clock change with where they fall (one launched into an idle stream
 * carries launch latency, one queued behind others does not), and the smallest of 16 is their
 * own time. */
#define LIM_COST_RISE_SAMPLES 4u
#define LIM_COST_RISE_PCT     3u
#define LIM_COST_RISE_SPAN_NS 200000000ull

struct lim_cost_entry {
    uint64_t key;     /* 0 = empty; atomically published */
    uint64_t est_ns;  /* the estimate at f_sat (lim_cost_sample); atomically published */
    uint64_t raw_ns;  /* the sample it comes from, as measured; atomically published */
    uint32_t count;   /* samples taken (saturating); atomically published */
    uint32_t next;    /* ring position */
    uint64_t samples[LIM_COST_SAMPLES];
    uint32_t mhz[LIM_COST_SAMPLES]; /* the clock each ran at (lim_clock_tag), 0 unknown */
};

/* Process-local.  Readers (lim_cost_estimate) may run concurrently with one writer
 * (lim_cost_sample, serialised by the caller). */
struct lim_cost_table {
    struct lim_cost_entry slot[LIM_COST_SLOTS];
    uint64_t fallback_ns; /* estimate for a signature never measured: a running mean */
    uint64_t fallback_raw_ns; /* ... of the samples as measured */
};

/* Signature of a kernel launch: function and geometry, or a graph exec handle. */
uint64_t lim_cost_key(uint64_t fn, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                      uint32_t bz, uint32_t shmem);

/* Estimated GPU ns of a launch with `key` on the saturated GPU; sets *known to the number of
 * samples the key has (0: never measured, so the estimate is the running mean; at most
 * LIM_COST_SAMPLES), and *raw_ns (when not NULL) to the GPU time of the sample the estimate
 * comes from, at the clock it ran at (what NVML's busy time counts). */
uint64_t lim_cost_estimate(const struct lim_cost_table *t, uint64_t key, int *known,
                           uint64_t *raw_ns);

/* Adds one measured sample that ran at clock `mhz` (lim_clock_tag; 0 unknown) and re-estimates
 * the key: each sample of the window brought to f_sat (`sat_mhz`, 0 unknown: as measured) with
 * lim_clock_scale_ppm, then the smallest of them, or of the newest that span
 * LIM_COST_RISE_SPAN_NS (LIM_COST_RISE_SAMPLES at least) when those all rose; samples of
 * unknown clock count only while none in the window has one (they may come from any clock:
 * before the clock thread's first reading, say).  Returns the number of samples the key now
 * has (saturating). */
uint32_t lim_cost_sample(struct lim_cost_table *t, uint64_t key, uint64_t sample_ns, uint32_t mhz,
                         uint32_t sat_mhz);

/* Whether the n-th launch of a known signature is measured, `*next` being the one due (0 at the
 * start); when it is, *next moves on by a gap of 16 to 47 launches drawn from a hash of n
 * (splitmix64's finaliser): one launch in ~32, never two close together (each measurement costs
 * two cuEventRecord), and no fixed stride.  A model launches the same cycle of kernels over and
 * over, and `n % 32` measured only the few positions of the cycle it aliased with (H200, a
 * batch-1 encoder of 80 launches a forward: 5 of 80 positions, so kernels whose first sample held
 * their lazy module loading's 2.4 ms were charged it for good, and the encoder ran at 5 % of its
 * speed under a 30 % limit).  A fully random 1 in 32 measured ~35 % more often through its
 * clusters and long gaps (the gate measures after 0.5 ms unmeasured). */
#define LIM_SAMPLE_GAP_MIN 16u
int lim_sample_due(uint64_t n, uint64_t *next);

/* Smallest of n (<= LIM_COST_SAMPLES) values, 0 for none. */
uint64_t lim_lowest(const uint64_t *v, uint32_t n);

/* ---- the policy / priority table ----------------------------------------------------------- */

enum lim_policy { LIM_POLICY_DEFAULT = 0, LIM_POLICY_FORCE = 1, LIM_POLICY_DISABLE = 2 };
enum lim_priority { LIM_PRIORITY_HIGH = 0, LIM_PRIORITY_LOW = 1 };
/* How a launch waits for its turn or its pace (GPUWARDEN_GATE_WAIT): asleep, or runnable and
 * yielding the CPU, which keeps the launching thread a whole task to the kernel's scheduler on a
 * node whose cores are all busy (docs/compute.md, known limits); `auto` yields while the
 * launching thread itself waits for a CPU, and sleeps otherwise. */
enum lim_wait { LIM_WAIT_SLEEP = 0, LIM_WAIT_YIELD = 1, LIM_WAIT_AUTO = 2 };

/* `auto` follows the share of wall time the thread that waits in the gate spent runnable but
 * not running (its scheduler run delay, /proc/<pid>/task/<tid>/schedstat), in hundredths of a
 * percent, averaged with weight 1/LIM_CPU_WAIT_WEIGHT per sample (a sample every 0.5 s: about
 * 2 s to follow a change).  It yields from LIM_WAIT_YIELD_FROM and sleeps again below
 * LIM_WAIT_SLEEP_BELOW.  H200, 16 cores, 4096² matmuls paced at 70 %: the launching thread
 * waited 0.0 % of the time on a calm node and 19-50 % asleep with 16 processes spinning
 * (while its GPU share fell to 57-62 %); yielding, 0-53 %, so it stays yielding while the load
 * lasts.  A throttled CPU quota counts as run delay too, but yielding there would only burn
 * the quota: for LIM_THROTTLE_HOLD_NS after the container's cgroup was last seen throttled it
 * sleeps. */
#define LIM_WAIT_YIELD_FROM  1000u /* 10 % */
#define LIM_WAIT_SLEEP_BELOW 200u  /* 2 % */
#define LIM_CPU_WAIT_WEIGHT  4u
#define LIM_THROTTLE_HOLD_NS 10000000000ull
/* LIM_WAIT_SLEEP or LIM_WAIT_YIELD at `now_ns`, from the way it waits now, the averaged run
 * delay share and when the container's CPU quota was last seen throttling it (0: never). */
uint32_t lim_wait_choose(uint32_t now_yielding, uint32_t cpu_wait_x100, uint64_t now_ns,
                         uint64_t throttled_at_ns);
/* The average after one sample: `delay_ns` of run delay over `wall_ns` (0: unchanged). */
uint32_t lim_cpu_wait_avg(uint32_t avg_x100, uint64_t delay_ns, uint64_t wall_ns);
/* A schedstat text ("RUN_NS DELAY_NS SLICES"): 0 and *delay_ns set, or -1 when it is not that. */
int lim_parse_schedstat(const char *text, uint64_t *delay_ns);
/* The nr_throttled of a cgroup v2 cpu.stat text: 0 and *n set, or -1 when it has none. */
int lim_parse_nr_throttled(const char *text, uint64_t *n);
/* The unified (cgroup v2) group of a /proc/<pid>/cgroup text: the path of its "0::" line into
 * out (size bytes), 0; -1 when it has none or the path does not fit. */
int lim_cgroup2_path(const char *text, char *out, size_t size);

/* The agent's override fields (vgpu_compute.h): zero means "no override". */
#define LIM_AGENT_UNLIMITED 101u /* agent_limit_pct value: explicitly not limited */
enum lim_agent_yield { LIM_AGENT_AUTO = 0, LIM_AGENT_YIELD = 1, LIM_AGENT_RUN = 2 };

struct lim_view {
    uint32_t policy;          /* enum lim_policy */
    uint32_t priority;        /* enum lim_priority */
    uint32_t limit_pct;       /* the container's gpucores on this device, 0 = none */
    uint32_t agent_limit_pct; /* 0 none, 1..100 limit, LIM_AGENT_UNLIMITED */
    uint32_t agent_yield;     /* enum lim_agent_yield */
    uint32_t node_known;      /* 0: the node region is unavailable, sharing is unknown */
    uint32_t others_high;     /* other active containers on the device, high priority */
    uint32_t others_low;      /* ... low priority */
    uint32_t light;           /* this container is light (lim_light): it claims like a high */
    uint32_t others_light;    /* other light containers busy now (claiming) */
    uint32_t others_paced;    /* other containers paced by their shares and active on the device
                               * (the turns' other members: not light, not yielding) */
    uint32_t others_paced_pct; /* ... the sum of their shares */
    uint32_t others_capped_pct; /* ... of which caps (lim_turn_member.capped) */
    uint32_t others_rest;     /* ... how many of them have no gpucores (lim_turn_member.rest) */
    uint32_t others_rest_pct; /* ... the sum of their shares */
    uint32_t rest_pct;        /* the share this one took as what the others' leave last tick
                               * (lim_verdict.rest), 0 none */
    uint32_t others_light_pct;  /* other light containers active on the device (out of the
                                 * turns): the sum of their configured shares */
    uint32_t others_light_rest; /* ... how many of them have no gpucores */
};

struct lim_verdict {
    uint32_t limit_pct; /* 0 = not held back; 1..99 = paced to this share (100 is not limited) */
    uint32_t yield;     /* 1 = launches wait while a high-priority container is active */
    uint32_t share_pct; /* the share it takes turns by (published to the others), 0 none: its
                         * gpucores (or the agent's limit), which limit_pct scales up under
                         * `default` when the members' shares add up to less than 100 */
    uint32_t capped;    /* share_pct is a cap (`force`), not a weight (`default`) */
    uint32_t rest;      /* share_pct is what the others' shares leave (lim_rest_share) */
};

struct lim_verdict lim_decide(const struct lim_view *v);

/* Under `default` a share is a weight, as cgroups' cpu.weight is: paced containers whose shares
 * add up to less than 100 split the whole GPU in proportion to them (30 + 30: 50 each; 30 + 40
 * beside a light service: 43 + 57 of what the service leaves), less what capped ones (`force`:
 * cpu.max) take (30 beside a capped 40: 60); the agent's limit (its plan writes the gpucores of
 * a container that shares) counts as the container's policy says.  Each was held to its share
 * before, and the rest of the GPU sat idle while they were busy (simulated GPU, 1-ms kernels:
 * 30 + 30 got 0.29 + 0.30).  The pace a weight `share_pct` scales to, beside others paced whose
 * shares add up to `others_pct`, `others_capped_pct` of it caps (rounded up; from 100 on, not
 * held). */
uint32_t lim_share_scaled(uint32_t share_pct, uint32_t others_pct, uint32_t others_capped_pct);

/* A low container with no gpucores (or 100) under `default`, beside containers paced by their
 * shares, takes turns with them by what their shares leave, split evenly with the other such
 * containers there, as cgroups give a group with no weight of its own what the weighted ones do
 * not take.  Before, it was not paced at all and time-sliced with them: a 30 % loop of 1-ms
 * kernels got 0.18-0.19 of the simulated GPU beside it (0.80), not the share it is guaranteed.
 * Its share beside paced containers whose own (configured) shares add up to `configured_pct`
 * and `others_rest` other containers with none; LIM_REST_MIN_PCT at least (beside shares of 100
 * and more it still takes turns, with a short window, rather than none).  Found light, it keeps
 * that share while other lows are active: they wait for its claims and so leave the turns (a
 * service with no gpucores beside a busy 30 % loop went light and unpaced in turn every tick,
 * and got 0.18 of the simulated GPU, 0.23 alone, with the loop held to its 30). */
#define LIM_REST_MIN_PCT 5u
uint32_t lim_rest_share(uint32_t configured_pct, uint32_t others_rest);

/* Whether lim_decide may give the container of view `v` what the others' shares leave: a
 * `default` low one with no gpucores of its own (nor the agent's) that knows its neighbours. */
int lim_may_take_rest(const struct lim_view *v);

/* ---- light containers: what a paced container leaves unused goes to the others -------------
 * Under `default`, gpucores is a guarantee, not a cap, but turns hold every member to its window
 * and a container paced beside others to its share: a request service at 30 % that uses 10 % left
 * its window idle (sim: the 70 % neighbour stayed at 0.70) and waited for its window on every
 * request (its 10 % fell to 5 %).  So a container that used less than LIM_LIGHT_ENTER_PCT of its
 * share lately, and had nothing to do at least LIM_LIGHT_IDLE_ENTER_PCT of the time, is *light*: it
 * leaves the turns and claims the GPU while it has work, as a high-priority container does (its
 * `default` neighbours wait while it is busy and keep their queues short, and take the whole GPU
 * between its requests), still held to its share by its own pace (in bursts).  It is a plain member
 * again (turns, paced) once it is idle less than LIM_LIGHT_IDLE_LEAVE_PCT of the time (it wants
 * more than its pace lets through, and waits rather than idles) or, a backstop, its use reaches
 * LIM_LIGHT_LEAVE_PCT of its share.  Light until stop 30 only under half its share (left at 60 %):
 * a service using 50-90 % of it went in and out of the turns every few hundred ms and waited for
 * its window on many requests (H200, 8 × 4096² every ~6.5 ms, ~21 % of the GPU at a 30 % share:
 * 72-73 % of its alone speed, p99 28 ms; light up to 90 %: 88-91 %, p99 2.5-3.0 ms, its 70 %
 * neighbour unchanged).  The idle test keeps a busy container that a neighbour's work held back
 * from being taken for a light one (simulated GPU, 3-ms kernels at 30 + 70: on use alone, each one
 * in turn was found light while the other's queue ran, and the 30 one got 0.24), and a member of
 * long turns (up to 640 ms, for long kernels) from being taken for one between its windows.  Its
 * use is the GPU time its launches were charged (as measured), averaged with weight
 * 1/LIM_USE_WEIGHT per tick (10 ms: ~80 ms to follow).  Idle: the share of the time not spent
 * waiting in the gate (for a window, a pace or a claim: neither idle nor busy) that its launches
 * did not fill with GPU time, over about the last LIM_IDLE_SPAN_NS of that time (lim_idle_avg).
 * (Sampling at each tick whether a thread was
 * in the gate or work was queued aliased with the turns: both follow the same clock, and a
 * service's ticks could land in its waits every time.)  A wait still in progress at a tick counts
 * up to the tick, and the averages stand still over a tick in which a claiming neighbour was busy
 * (ticker.c).  A container starts paced at its whole share and busy, and is not found light before
 * its averages have run LIM_LIGHT_SETTLE_NS: its first ticks include a start's own stalls (sim,
 * 3-ms kernels: a busy 70 % one read 34 % used and 65 % idle ~80 ms after it was first paced). */
#define LIM_LIGHT_ENTER_PCT      90u
#define LIM_LIGHT_LEAVE_PCT      125u
#define LIM_LIGHT_IDLE_ENTER_PCT 50u
#define LIM_LIGHT_IDLE_LEAVE_PCT 30u
#define LIM_USE_WEIGHT           8u
#define LIM_LIGHT_SETTLE_NS      300000000ull
/* A light container that waits in the gate (its own pace: it is out of the turns, and waits for
 * a claiming neighbour are not counted) LIM_LIGHT_WAIT_LEAVE_PCT of the time or more wants at
 * least twice what its share lets through: it is no longer light, and starts again busy, as at
 * its start (averages anew, LIM_LIGHT_SETTLE_NS before it may be found light again).  Its waited
 * share is averaged with weight 1/LIM_WAITED_WEIGHT per tick (~40 ms to follow), from 0 when it
 * is found light: what it waited before, in the turns, was for its windows (a service of two
 * processes, found light at once with 64-77 % of its time waited so, left again a tick later,
 * back and forth: 0.03 of the GPU where 0.10 was its own).  Without this,
 * a container found light while it idled (a model loaded, then waiting for work) that starts a
 * loop flat out stayed light for 0.3-0.8 s: its neighbour, out of the turns, ran work between its
 * claims, its kernels time-sliced with that work and took longer than they were charged, and the
 * difference read as idle (H100, 12-ms kernels at 30 beside a 70 loop: 22.4 % of the saturated
 * throughput in its first second where 28.9 was due; simulated GPU: 0.23 for 0.30).  Only a
 * container whose longest recent kernels take LIM_LIGHT_WAIT_LONGEST_NS or more leaves so: such
 * kernels meet the time slices of the neighbour's work at each claim, and take turns well.  A
 * loop of short kernels synchronised after each keeps claiming, which serves it better than the
 * turns, whose windows it cannot fill (H200 / H100, stop 42, 0.2-ms matmuls at 30 beside a
 * never-synchronising 70: 24.3-24.6 % of the saturated throughput light in its first second,
 * 20.2-21.4 in the turns).  The 1-ms line lies between those two shapes (0.2-ms and 12-ms
 * matmuls); kernels of 1-10 ms were not measured on a GPU. */
#define LIM_LIGHT_WAIT_LEAVE_PCT   50u
#define LIM_WAITED_WEIGHT          4u
#define LIM_LIGHT_WAIT_LONGEST_NS  1000000ull
/* A light container whose claim has run without a break for LIM_LIGHT_RUN_MAX_NS is held back
 * too: its neighbours wait while it claims, and a launch-bound loop (a small model's inference
 * loop, each launch a few us of GPU work) claims without end although it keeps the GPU busy a
 * fraction of the time.  Beside it a 70 % loop got nothing (H100, a 30 % container of 1024²
 * matmuls synchronised every 4, ~24 % of the GPU alone: the 4096² loop at 0.0 % of its alone
 * throughput; simulated GPU, 5-us kernels: 0.002 of the GPU).  Its requests are not requests:
 * it takes turns, as any member does, its share of the time.  In the turns it is found light
 * again (it leaves most of its window idle), so each hold keeps it out of light longer than the
 * last (lim_run_backoff: LIM_LIGHT_SETTLE_NS, then twice as long each time, up to
 * LIM_LIGHT_RUN_SETTLE_MAX_NS): with 0.3 s each time it claimed ~20 ms in every ~330 ms, and its
 * 70 % neighbour lost that (simulated GPU: 0.61 of the GPU).  A service is held back so too when
 * a burst of requests runs back to back; its burst over, it is a service again, and it starts
 * from 0.3 s once it has stayed light LIM_LIGHT_RUN_FORGET_NS: held out of light 2.3 s at its
 * first hold, it waited for its window on every request (H100, one 1024² matmul a request every
 * ~2 ms beside a 70 % loop, after 0.5 s of requests back to back: 39 % of its alone speed, p99
 * 28 ms; the hold there is inferred, not logged: the simulated GPU reproduces it, 0.003 of the
 * GPU for 0.006 alone). */
#define LIM_LIGHT_RUN_MAX_NS        10000000ull
/* ... unless the claim kept the GPU busy: a request of one or a few long kernels (a model's
 * forward pass of 10-50 ms, say) also claims without a break, but the GPU time its container
 * was charged over the claim is LIM_LIGHT_RUN_BUSY_PCT or more of it, where a launch-bound
 * loop's is about its busy share alone (NVML: ~24 % for 1024² matmuls on the H100; its charged
 * share there was not read; simulated GPU, two processes of 5-us kernels: 18-39 %; a container
 * of such processes 99 % busy alone, light under a larger share, may pass).
 * Such a busy claim is held back from LIM_LIGHT_BURST_NS on (a loop flat out resuming after a
 * pause shorter than LIM_LIGHT_RUN_GAP_NS: its neighbours lose that much of the GPU at most, once
 * per hold, where they lost 10 ms before), and a light container's pace lets that much GPU time
 * go at once (its tolerance, lim_pacer_book_bursty; earned back at its share while it idles), so
 * that the request does not wait in its pace either.  Until stop 49 a
 * service of 2 x 12-ms kernels every ~124 ms at 30 beside a 70 loop was held back at its first
 * request and waited for its window on each one after: 64.6 % of its alone speed on the
 * simulated GPU, 99.9 % since (bench_compute_sim.py --only light). */
#define LIM_LIGHT_RUN_BUSY_PCT      75u
#define LIM_LIGHT_BURST_NS          50000000ull
/* ... and only where the claim came after a pause shorter than LIM_LIGHT_RUN_GAP_NS, as a
 * service's next request does (its pace's longer tolerance too): a container light because it
 * idled (a model loaded and waiting, a loop that paused) whose loop then starts flat out keeps
 * the 10-ms bound and the 20-ms bursts.  On the simulated GPU, a 30 % newcomer of 10-ms kernels
 * that idled 1.5 s beside a 70 loop claimed the GPU ~40 ms with the longer bound, read 0.32-0.37
 * of the GPU in its first second for 0.30, and the stretched samples of that claim took a
 * 320-ms period in about half the runs, 160 ms its own.  With the 10-ms bound but the longer
 * tolerance, one run in six read 0.20 (67 % of its due): the debt of its first kernels, charged
 * provisionally and settled once measured, came out of its first windows in the turns. */
#define LIM_LIGHT_RUN_GAP_NS        250000000ull
#define LIM_LIGHT_RUN_SETTLE_MAX_NS 2400000000ull
#define LIM_LIGHT_RUN_FORGET_NS     1000000000ull
/* The pace tolerance of a light container's launch in a claim that began `gap_ns` after the
 * container's previous work: LIM_LIGHT_BURST_NS of GPU time at `limit_pct` where the pause was
 * shorter than LIM_LIGHT_RUN_GAP_NS (a request), else none (the shared pace's own). */
uint64_t lim_light_tolerance(uint64_t gap_ns, uint32_t limit_pct);
/* A light container's claim runs while its work does and LIM_LIGHT_CLAIM_JOIN_NS after: a launch
 * that comes sooner continues it (its run, its charge and the pause it began after go on); one that
 * came sooner but then waited in its pace past that end begins a new run (the neighbours had the
 * GPU meanwhile) with the claim's credit (the pause it began after), or, where that credit is none
 * (a claim after a pause of LIM_LIGHT_RUN_GAP_NS or more: a loop starting), goes on with the run
 * through the wait, so that LIM_LIGHT_RUN_MAX_NS holds it back (restarted at each of its kernels, a
 * newcomer of 10-ms kernels paced ~40 ms apart stayed light until its pace's rule, 0.11-0.23 s, in
 * 9 runs of 66 on the simulated GPU; 0.006-0.064 s in 84 since); a later one begins a new claim.
 * Witnesses keep a claim whose work runs late (vgpu_claim_runs_on): the ticker's watch, from the
 * claim's first launch on (it wakes the ticker: vgpu_ticker_nudge), and a synchronise that waited.
 * Until stop 53 a launch was judged after its pace's wait: on the simulated GPU the loop below's
 * second kernel, paced ~40 ms after its first one's work, began a claim "0.1-0.3 ms after its
 * previous work" with a request's credit, in 12 runs of 21 (with the wake already).  Until stop 52
 * a claim ended LIM_LOW_QUEUE_NS after its work's estimated end, late or not: a 30 % newcomer of
 * 16384² matmuls synchronised after each, light because it idled 2 s, whose loop's first kernel was
 * of unknown cost (estimated ~1 ms; it ran 12-27 ms, sliced with its 70 neighbour's queue), began a
 * new claim at each kernel, 0.26-0.48 ms after the last one's work.  No claim ran the 10 ms that
 * holds a loop starting flat out back, and each, after a pause far shorter than
 * LIM_LIGHT_RUN_GAP_NS, passed for a request with LIM_LIGHT_BURST_NS of credit: it ran 3 kernels
 * back to back, paid them back after, and read 18.5-27.2 % of saturated throughput in its first
 * second, ~28 due (H100, eleven runs, median 21.0); joined, 24.0-29.3 (four runs alternated with
 * those), light for one claim of 11-17 ms.  A millisecond joins a loop's synchronisation and its
 * next launch (as logged on the H100 with PyTorch: 0.13-0.48 ms) and, by arithmetic rather than a
 * run of this rule, keeps apart the requests of a service pausing ~2 ms (one 1024² matmul each). */
#define LIM_LIGHT_CLAIM_JOIN_NS     1000000ull
/* The use after one tick: `charged_ns` charged over `wall_ns`, in hundredths of a percent
 * (wall_ns 0: unchanged). */
uint32_t lim_use_avg(uint32_t use_x100, uint64_t charged_ns, uint64_t wall_ns);
/* The waited share after one tick: `waited_ns` waited in the gate over `wall_ns`, alike. */
uint32_t lim_waited_avg(uint32_t waited_x100, uint64_t waited_ns, uint64_t wall_ns);
/* The idle share is the part of the container's recent free time (not waited in the gate) that
 * the GPU time it was charged does not fill.  Two sums over about LIM_IDLE_SPAN_NS of free time:
 * each tick adds its free time and its charges, and keeps of what they held the part of the span
 * its free time does not take.  So idle time counts by its length (ticks waited but for a few µs
 * with nothing launched hardly move it), and work a tick launched counts against the free time
 * it then runs in, the next ticks' too (a member of the turns launches its window's work in the
 * last µs of a waited tick and waits for it in the next one, free, its GPU busy).  {0, 0}: no
 * history, a span free and filled (a container starts paced at its whole share and busy).
 * Averaged per tick instead (each tick's own idle part, an eighth a tick; a busy tick an eighth
 * towards 0 however little of it was free), a service over its share (sim, 8 × 0.2-ms kernels a
 * request, idle 2.5 ms, at 30 beside a 70 % loop) that started in the turns read 44 % idle where
 * 63 % of its free time was: its window's launches came in the last 0.2 ms of waited ticks, each
 * such tick an eighth towards 0.  It was not found light in 2 runs of 12 and got 32 % of its alone
 * speed (80 % when light).  Weighed by the free part alone, busy ticks too, 3-ms kernels at
 * 30 + 70 kept their start's idle reading (98 %: ~330 ms neither charged nor waited) and read
 * 0.38 + 0.58 in two runs of three; per tick alike, a tick waited all but a sliver read as all
 * idle (a busy 30 % loop beside a 70 % one was found light in one run of seven). */
#define LIM_IDLE_SPAN_NS 80000000ull
struct lim_idle {
    uint64_t free_ns;    /* free time, summed over about the span */
    uint64_t charged_ns; /* GPU time charged, summed alike */
};
/* The averages after one tick of `wall_ns` in which the container's launches were charged
 * `charged_ns` and it waited `waited_ns` in the gate (unchanged when it waited the whole tick). */
struct lim_idle lim_idle_avg(struct lim_idle a, uint64_t charged_ns, uint64_t waited_ns,
                             uint64_t wall_ns);
/* The idle share, in hundredths of a percent: 0 when the charges fill the free time. */
uint32_t lim_idle_share(struct lim_idle a);
/* A light container's claim: how long it has run without a break, the GPU time its container
 * was charged meanwhile, and how long the container had nothing queued before it began. */
struct lim_claim {
    uint64_t run_ns, charged_ns, gap_ns;
};
/* Whether a light container that waited that share of the time in the gate, its longest recent
 * kernels taking `longest_ns`, is held back by its own pace (LIM_LIGHT_WAIT_LEAVE_PCT), or for
 * its claim (LIM_LIGHT_RUN_MAX_NS, LIM_LIGHT_RUN_BUSY_PCT, LIM_LIGHT_BURST_NS,
 * LIM_LIGHT_RUN_GAP_NS): either way it is light no more, and starts again busy (above). */
enum lim_hold { LIM_HOLD_NONE, LIM_HOLD_PACE, LIM_HOLD_RUN };
enum lim_hold lim_held_back(uint32_t waited_x100, uint64_t longest_ns, struct lim_claim claim);
/* Whether a container paced at `limit_pct` with that use and idle share, averaged for
 * `since_ns`, is light, from whether it was (the hysteresis above; `held_back`, lim_held_back,
 * only ends a light spell). */
uint32_t lim_light(uint32_t was_light, uint32_t use_x100, uint32_t idle_x100, int held_back,
                   uint32_t limit_pct, uint64_t since_ns);
/* How long a light container whose claim ran on (LIM_LIGHT_RUN_MAX_NS) is not light again, from
 * its last such hold's (`last_ns`, 0 none) and how long it had been light since (`light_ns`):
 * LIM_LIGHT_SETTLE_NS at first, or after it stayed light LIM_LIGHT_RUN_FORGET_NS; twice the last
 * otherwise, up to LIM_LIGHT_RUN_SETTLE_MAX_NS. */
uint64_t lim_run_backoff(uint64_t last_ns, uint64_t light_ns);

/* ---- priority: a low one's queue beside a claiming high ------------------------------------- */

/* The GPU runs a context's queued work before another's new work (the simulated GPU strictly in
 * launch order; a real one time-slices between contexts), so a high-priority burst can wait for
 * whatever a low-priority neighbour has queued ahead of it.  While a claiming high is on the
 * device, a low keeps its queue short: a launch of `cost_ns` goes when the low's estimated queued
 * work (`queued_ns`, ending that far from now) plus the launch fits `bound_ns`, or when the queue
 * is down to half the bound (so a kernel longer than half the bound still overlaps with the one
 * before it and the GPU does not idle between them).  A high burst then waits for at most
 * max(bound, bound / 2 + cost) of the low's work.  Returns how long to wait first (0: go).
 * The bound also pads every claim (gate.c), so it is paid after each request of a light
 * service: 1 ms before; 0.4 ms gave a 70 % loop beside a service of one 1024² matmul every
 * 2 ms 91.0 % of its alone throughput where it had 68.4 (H200, one call each, stop 31). */
#define LIM_LOW_QUEUE_NS 400000ull
uint64_t lim_low_queue_wait(uint64_t queued_ns, uint64_t cost_ns, uint64_t bound_ns);

/* ---- environment values --------------------------------------------------------------------- */

/* Each returns 0 and stores the value, or -1 when `s` is malformed (the caller names the
 * variable and takes the safe side, see docs/compute.md). */
int lim_parse_pct(const char *s, uint32_t *out);      /* "0".."100", optional trailing '%' */
int lim_parse_policy(const char *s, uint32_t *out);   /* default | force | disable */
int lim_parse_priority(const char *s, uint32_t *out); /* 0 | 1 */
int lim_parse_wait(const char *s, uint32_t *out);     /* sleep | yield | auto (lim_wait) */

#endif
