/* Test driver for the pure compute controller (libvgpu/src/limiter.c), compiled with it by
 * tests/compute/test_controller_*.py.  It has no clock of its own: a fake clock and a fake GPU
 * (one queue, kernels back to back) let the tests check the pacer's arithmetic exactly.
 *
 *   limiter_driver pace LIMIT COST_NS RUN_NS TOL_NS QUEUE_NS [bursty [BURST_NS]]
 *       one launcher launching as fast as the pacer lets it; prints the busy share measured
 *       from 1 s on, the largest amount of work queued ahead of the GPU, and how many times
 *       the launcher had to wait (with "bursty": lim_pacer_book_bursty, bursts of BURST_NS,
 *       default TOL_NS).
 *   limiter_driver burst LIMIT COST_NS IDLE_NS TOL_NS
 *       after IDLE_NS of idleness, how many launches go without waiting (bounded credit).
 *   limiter_driver shared LIMIT COST_NS RUN_NS TOL_NS PROCS
 *       PROCS launchers sharing one pacer word round-robin; prints the total busy share.
 *   limiter_driver decide
 *       prints the verdict for every combination of the inputs of lim_decide (limit, yield,
 *       share, capped; other paced members only with an active low: they are counted among
 *       those).
 *   limiter_driver parse pct|policy|priority|wait|schedstat|throttled VALUE
 *       (schedstat: the run delay; throttled: a cpu.stat's nr_throttled)
 *   limiter_driver waitchoose YIELDING CPU_WAIT_X100 NOW_NS THROTTLED_AT_NS
 *       (prints lim_wait_choose)
 *   limiter_driver cpuwait AVG_X100 DELAY_NS WALL_NS [DELAY_NS WALL_NS ...]
 *       (prints lim_cpu_wait_avg after each sample)
 *   limiter_driver cgroup2 TEXT   (prints lim_cgroup2_path, or "none")
 *   limiter_driver use AVG_X100 CHARGED_NS WALL_NS [CHARGED_NS WALL_NS ...]
 *       (prints lim_use_avg after each tick)
 *   limiter_driver light WAS_LIGHT USE_X100 IDLE_X100 HELD_BACK LIMIT SINCE_NS   (lim_light)
 *   limiter_driver heldback WAITED_X100 LONGEST_NS CLAIM_RUN_NS [RUN_CHARGED_NS [GAP_NS]]
 *       (prints lim_held_back: 0 not, 1 by its pace, 2 for a claim that ran on; the claim's
 *       charged GPU time and the pause before it default to none)
 *   limiter_driver lighttol GAP_NS LIMIT   (prints lim_light_tolerance)
 *   limiter_driver backoff LIGHT_NS [LIGHT_NS ...]   (prints lim_run_backoff after each hold,
 *       from none, each after that long light)
 *   limiter_driver idle FREE_NS CHARGED_NS  CHARGED_NS WAITED_NS WALL_NS [...]
 *       (from those averages, prints lim_idle_share after each tick's lim_idle_avg)
 *   limiter_driver lowest V1 [V2 ...]
 *   limiter_driver cost [sat=MHZ] SAMPLE[@MHZ]...
 *       one key; after each sample (ns, run at clock MHZ, default unknown) prints the estimate
 *       at f_sat MHZ (default unknown), whether the key is known, and the raw sample behind it
 *   limiter_driver clocktag MHZ UTIL REF_MHZ  (prints lim_clock_tag)
 *   limiter_driver clockscale F_NOW F_SAT  (prints lim_clock_scale_ppm)
 *   limiter_driver sampled CYCLE LAUNCHES  (prints, for launches 1..LAUNCHES of a cycle of CYCLE
 *       signatures, how many were measured (lim_sample_due) and how many positions of the cycle)
 *   limiter_driver sat UTIL:MHZ...         (prints f_sat after each NVML sample)
 *   limiter_driver feedback K_PPM BUSY_NS CHARGED_NS WINDOW_NS [ROUNDS [whole]]
 *       prints the factor after each of ROUNDS (default 1) windows with the same readings
 *       (`whole`: the first is the process's first judged window)
 *   limiter_driver satest F_NOW POWER_MW UTIL LIMIT_MW   (prints lim_sat_estimate)
 *   limiter_driver window ME ID:LIMIT[:CLASS[:c]]...   (prints lim_turn_window: off len period,
 *       ns; `:c` a capped member)
 *   limiter_driver turnwait OFF_NS LEN_NS NOW_NS QUEUED_NS COST_NS [PERIOD_NS]
 *                                          (prints lim_turn_wait; the period defaults to 40 ms)
 *   limiter_driver splitwait OFF_NS LEN_NS PERIOD_NS RANK N IDLE NOW_NS QUEUED_NS COST_NS
 *                                          (prints lim_split_wait; IDLE the idle parts' bits)
 *   limiter_driver splitbusy HORIZON_NS LONGEST_NS GAP_NS   (prints lim_split_busy_until)
 *   limiter_driver turnclass LONGEST_NS LIMIT [OTHERS_NS]
 *       (prints lim_turn_class of lim_period_longest(LONGEST_NS, OTHERS_NS, default 0))
 *   limiter_driver turnclasskept LONGEST_NS LIMIT CURRENT   (prints lim_turn_class_kept)
 *   limiter_driver longest NS KEY LIGHT  KEY CHARGE_NS SETTLED LIGHT [...]
 *       (from {NS, KEY, LIGHT}, prints lim_longest_next's ns after each launch of KEY ...)
 *   limiter_driver periodsamples LIGHT LIGHT_LEFT_NS NOW_NS YOUNG   (prints lim_period_samples)
 *   limiter_driver lowqueue QUEUED_NS COST_NS BOUND_NS   (prints lim_low_queue_wait)
 *   limiter_driver settle TAT_NS CHARGED_NS COST_NS LIMIT   (prints tat after lim_pacer_settle)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"

static uint64_t arg_u64(const char *s)
{
    return strtoull(s, NULL, 10);
}

static int cmd_pace(char **a)
{
    uint32_t limit = (uint32_t)arg_u64(a[0]);
    uint64_t cost = arg_u64(a[1]), run = arg_u64(a[2]), tol = arg_u64(a[3]);
    uint64_t queue = arg_u64(a[4]);
    uint64_t tat = 0, now = 0, gpu_tail = 0, busy = 0, max_queued = 0, waits = 0;
    const uint64_t from = 1000000000ull, launch_cpu = 2000; /* 2 us of CPU per launch */
    int bursty = a[5] != NULL && strcmp(a[5], "bursty") == 0;
    uint64_t burst = bursty && a[6] != NULL ? arg_u64(a[6]) : tol;

    while (now < run) {
        uint64_t wait, start;
        if (gpu_tail > now + queue) /* the queue bound: wait for the GPU */
            now = gpu_tail - queue;
        wait = bursty ? lim_pacer_book_bursty(&tat, now, cost, limit, tol, burst)
                      : lim_pacer_book(&tat, now, cost, limit, tol);
        waits += wait > 0;
        now += wait;
        start = gpu_tail > now ? gpu_tail : now;
        gpu_tail = start + cost;
        if (gpu_tail - now > max_queued)
            max_queued = gpu_tail - now;
        if (start >= from && gpu_tail <= run)
            busy += cost;
        else if (gpu_tail > from && start < run) /* partly inside [from, run) */
            busy += (gpu_tail < run ? gpu_tail : run) - (start > from ? start : from);
        now += launch_cpu;
    }
    printf("share %.4f max_queued_ns %llu waits %llu\n", (double)busy / (double)(run - from),
           (unsigned long long)max_queued, (unsigned long long)waits);
    return 0;
}

static int cmd_burst(char **a)
{
    uint32_t limit = (uint32_t)arg_u64(a[0]);
    uint64_t cost = arg_u64(a[1]), idle = arg_u64(a[2]), tol = arg_u64(a[3]);
    uint64_t tat = 0, now = 0;
    unsigned free_launches = 0;
    int i;

    for (i = 0; i < 1000; i++) /* a busy period first */
        now += lim_pacer_book(&tat, now, cost, limit, tol);
    now += idle;
    while (lim_pacer_book(&tat, now, cost, limit, tol) == 0 && free_launches < 1000000)
        free_launches++;
    printf("free_launches %u\n", free_launches);
    return 0;
}

static int cmd_shared(char **a)
{
    uint32_t limit = (uint32_t)arg_u64(a[0]);
    uint64_t cost = arg_u64(a[1]), run = arg_u64(a[2]), tol = arg_u64(a[3]);
    unsigned procs = (unsigned)arg_u64(a[4]), p;
    uint64_t tat = 0, gpu_tail = 0, busy = 0, now[64] = {0};

    if (procs == 0 || procs > 64)
        return 2;
    for (;;) {
        /* the launcher whose clock is earliest goes next */
        unsigned who = 0;
        uint64_t start;
        for (p = 1; p < procs; p++)
            if (now[p] < now[who])
                who = p;
        if (now[who] >= run)
            break;
        now[who] += lim_pacer_book(&tat, now[who], cost, limit, tol);
        start = gpu_tail > now[who] ? gpu_tail : now[who];
        gpu_tail = start + cost;
        if (gpu_tail <= run)
            busy += cost;
        now[who] += 2000;
    }
    printf("share %.4f\n", (double)busy / (double)run);
    return 0;
}

/* An average share after each PART WHOLE pair of argv[3..], from argv[2]. */
static int cmd_avg(int argc, char **argv, uint32_t (*avg_of)(uint32_t, uint64_t, uint64_t))
{
    uint32_t avg = (uint32_t)arg_u64(argv[2]);

    for (int i = 3; i + 1 < argc; i += 2) {
        avg = avg_of(avg, arg_u64(argv[i]), arg_u64(argv[i + 1]));
        printf("%u\n", avg);
    }
    return 0;
}

static int cmd_decide(void)
{
    static const uint32_t limits[] = {0, 30, 100};
    static const uint32_t agent_limits[] = {0, 20, LIM_AGENT_UNLIMITED};
    /* other paced members: none, one weighted at 20, one at 70, one capped at 40, one with no
     * gpucores taking the 70 that a 30 leaves; and the share this one took last tick as what the
     * others leave (lim_rest_share), 50 */
    static const uint32_t paced_pcts[] = {0, 20, 70, 40, 70}, capped_pcts[] = {0, 0, 0, 40, 0},
                          rest_pcts[] = {0, 0, 0, 0, 70};
    uint32_t po, pr, li, al, ay, nk, oh, ol, me, ot, pm;

    for (po = 0; po < 3; po++)
        for (pr = 0; pr < 2; pr++)
            for (li = 0; li < 3; li++)
                for (al = 0; al < 3; al++)
                    for (ay = 0; ay < 3; ay++)
                        for (nk = 0; nk < 2; nk++)
                            for (oh = 0; oh < 2; oh++)
                                for (ol = 0; ol < 2; ol++)
                                    for (me = 0; me < 2; me++)
                                        for (ot = 0; ot < 2; ot++)
                                            for (pm = 0; pm < (ol ? 5u : 1u); pm++) {
                                                /* a paced member is an active low too */
                                                struct lim_view v = {po, pr, limits[li],
                                                                     agent_limits[al], ay, nk,
                                                                     oh, ol, me, ot, pm ? 1u : 0u,
                                                                     paced_pcts[pm],
                                                                     capped_pcts[pm],
                                                                     rest_pcts[pm] ? 1u : 0u,
                                                                     rest_pcts[pm], 50u, 0u, 0u};
                                                struct lim_verdict r = lim_decide(&v);
                                                printf("%u %u %u %u %u %u %u %u %u %u %u %u %u "
                                                       "%u %u -> %u %u %u %u %u\n",
                                                       po, pr, limits[li], agent_limits[al], ay,
                                                       nk, oh, ol, me, ot, v.others_paced,
                                                       v.others_paced_pct, v.others_capped_pct,
                                                       v.others_rest_pct, v.rest_pct,
                                                       r.limit_pct, r.yield,
                                                       r.share_pct, r.capped, r.rest);
                                            }
    return 0;
}

static int cmd_parse(char **a)
{
    uint32_t v = 0;
    uint64_t v64 = 0;
    int rc, wide = 0; /* a 64-bit parser's */

    if (strcmp(a[0], "pct") == 0)
        rc = lim_parse_pct(a[1], &v);
    else if (strcmp(a[0], "policy") == 0)
        rc = lim_parse_policy(a[1], &v);
    else if (strcmp(a[0], "priority") == 0)
        rc = lim_parse_priority(a[1], &v);
    else if (strcmp(a[0], "wait") == 0)
        rc = lim_parse_wait(a[1], &v);
    else if (strcmp(a[0], "schedstat") == 0)
        rc = lim_parse_schedstat(a[1], &v64), wide = 1;
    else if (strcmp(a[0], "throttled") == 0)
        rc = lim_parse_nr_throttled(a[1], &v64), wide = 1;
    else
        return 2;
    if (rc != 0)
        printf("malformed\n");
    else if (wide)
        printf("%llu\n", (unsigned long long)v64);
    else
        printf("%u\n", v);
    return 0;
}

static int cmd_cost(int n, char **a)
{
    static struct lim_cost_table table;
    uint64_t key = lim_cost_key(0x1234, 1, 2, 3, 4, 5, 6, 7);
    uint32_t sat = 0;
    int known = 0, i = 0;

    if (n > 0 && strncmp(a[0], "sat=", 4) == 0)
        sat = (uint32_t)arg_u64(a[i++] + 4);
    for (; i < n; i++) {
        const char *at = strchr(a[i], '@');
        uint64_t est, raw = 0;
        lim_cost_sample(&table, key, arg_u64(a[i]), at ? (uint32_t)arg_u64(at + 1) : 0u, sat);
        est = lim_cost_estimate(&table, key, &known, &raw);
        printf("%llu %d %llu\n", (unsigned long long)est, known, (unsigned long long)raw);
    }
    return 0;
}

static int cmd_sat(int n, char **a)
{
    uint32_t sat = 0;
    int i;

    for (i = 0; i < n; i++) {
        unsigned util = 0, mhz = 0;
        if (sscanf(a[i], "%u:%u", &util, &mhz) != 2)
            return 2;
        sat = lim_sat_update(sat, mhz, util);
        printf("%u\n", sat);
    }
    return 0;
}

static int cmd_feedback(int argc, char **a)
{
    uint32_t k = (uint32_t)arg_u64(a[0]);
    uint64_t rounds = argc >= 5 ? arg_u64(a[4]) : 1, i;
    int whole = argc >= 6 && strcmp(a[5], "whole") == 0;

    for (i = 0; i < rounds; i++) {
        k = lim_busy_feedback(k, arg_u64(a[1]), arg_u64(a[2]), arg_u64(a[3]), whole && i == 0);
        printf("%u\n", k);
    }
    return 0;
}

static int cmd_window(int n, char **a)
{
    struct lim_turn_member m[LIM_TURN_MAX * 2];
    uint32_t k = 0;
    struct lim_turn t;

    for (int i = 1; i < n && k < LIM_TURN_MAX * 2; i++) {
        char *colon = strchr(a[i], ':');
        if (colon == NULL)
            return 2;
        m[k].id = arg_u64(a[i]);
        m[k].limit_pct = (uint32_t)arg_u64(colon + 1);
        colon = strchr(colon + 1, ':');
        m[k].period_class = colon != NULL ? (uint32_t)arg_u64(colon + 1) : 0u;
        m[k].capped = colon != NULL && strchr(colon + 1, ':') != NULL; /* ID:LIMIT:CLASS:c */
        k++;
    }
    t = lim_turn_window(m, k, arg_u64(a[0]));
    printf("%u %u %u\n", t.off_ns, t.len_ns, t.period_ns);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 7 && strcmp(argv[1], "pace") == 0)
        return cmd_pace(argv + 2);
    if (argc >= 6 && strcmp(argv[1], "burst") == 0)
        return cmd_burst(argv + 2);
    if (argc >= 7 && strcmp(argv[1], "shared") == 0)
        return cmd_shared(argv + 2);
    if (argc == 2 && strcmp(argv[1], "decide") == 0)
        return cmd_decide();
    if (argc == 4 && strcmp(argv[1], "parse") == 0)
        return cmd_parse(argv + 2);
    if (argc == 3 && strcmp(argv[1], "cgroup2") == 0) {
        char path[64];
        printf("%s\n", lim_cgroup2_path(argv[2], path, sizeof path) == 0 ? path : "none");
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "waitchoose") == 0) {
        printf("%u\n", lim_wait_choose((uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                                        arg_u64(argv[4]), arg_u64(argv[5])));
        return 0;
    }
    if (argc >= 5 && argc % 2 == 1 && strcmp(argv[1], "cpuwait") == 0)
        return cmd_avg(argc, argv, lim_cpu_wait_avg);
    if (argc >= 5 && argc % 2 == 1 && strcmp(argv[1], "use") == 0)
        return cmd_avg(argc, argv, lim_use_avg);
    if (argc >= 5 && argc <= 7 && strcmp(argv[1], "heldback") == 0) {
        struct lim_claim claim = {arg_u64(argv[4]), argc >= 6 ? arg_u64(argv[5]) : 0,
                                  argc == 7 ? arg_u64(argv[6]) : 0};
        printf("%d\n", (int)lim_held_back((uint32_t)arg_u64(argv[2]), arg_u64(argv[3]), claim));
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "lighttol") == 0) {
        printf("%llu\n", (unsigned long long)lim_light_tolerance(arg_u64(argv[2]),
                                                                 (uint32_t)arg_u64(argv[3])));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "backoff") == 0) {
        uint64_t b = 0;
        for (int i = 2; i < argc; i++) {
            b = lim_run_backoff(b, arg_u64(argv[i]));
            printf(i + 1 < argc ? "%llu " : "%llu\n", (unsigned long long)b);
        }
        return 0;
    }
    if (argc == 8 && strcmp(argv[1], "light") == 0) {
        printf("%u\n", lim_light((uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                                 (uint32_t)arg_u64(argv[4]), (int)arg_u64(argv[5]),
                                 (uint32_t)arg_u64(argv[6]), arg_u64(argv[7])));
        return 0;
    }
    if (argc >= 5 && argc % 2 == 1 && strcmp(argv[1], "waited") == 0)
        return cmd_avg(argc, argv, lim_waited_avg);
    if (argc >= 7 && argc % 3 == 1 && strcmp(argv[1], "idle") == 0) {
        struct lim_idle avg = {arg_u64(argv[2]), arg_u64(argv[3])};
        for (int i = 4; i + 2 < argc; i += 3) {
            avg = lim_idle_avg(avg, arg_u64(argv[i]), arg_u64(argv[i + 1]), arg_u64(argv[i + 2]));
            printf("%u\n", lim_idle_share(avg));
        }
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "lowest") == 0) {
        uint64_t v[LIM_COST_SAMPLES];
        uint32_t n = 0;
        for (int i = 2; i < argc && n < LIM_COST_SAMPLES; i++)
            v[n++] = arg_u64(argv[i]);
        printf("%llu\n", (unsigned long long)lim_lowest(v, n));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "cost") == 0)
        return cmd_cost(argc - 2, argv + 2);
    if (argc == 4 && strcmp(argv[1], "sampled") == 0) {
        uint64_t cycle = arg_u64(argv[2]), n = arg_u64(argv[3]), i, hit = 0, where = 0, next = 0;
        static unsigned char seen[4096];
        if (cycle == 0 || cycle > sizeof seen)
            return 2;
        for (i = 1; i <= n; i++) {
            if (!lim_sample_due(i, &next))
                continue;
            hit++;
            if (!seen[i % cycle]) {
                seen[i % cycle] = 1;
                where++;
            }
        }
        printf("%llu %llu\n", (unsigned long long)hit, (unsigned long long)where);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "clockscale") == 0) {
        printf("%u\n", lim_clock_scale_ppm((uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3])));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "clocktag") == 0) {
        printf("%u\n", lim_clock_tag((uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                                     (uint32_t)arg_u64(argv[4])));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "sat") == 0)
        return cmd_sat(argc - 2, argv + 2);
    if (argc >= 6 && strcmp(argv[1], "feedback") == 0)
        return cmd_feedback(argc - 2, argv + 2);
    if (argc == 6 && strcmp(argv[1], "satest") == 0) {
        printf("%u\n", lim_sat_estimate((uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                                        (uint32_t)arg_u64(argv[4]), (uint32_t)arg_u64(argv[5])));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "window") == 0)
        return cmd_window(argc - 2, argv + 2);
    if (argc == 11 && strcmp(argv[1], "splitwait") == 0) {
        struct lim_turn t = {(uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                             (uint32_t)arg_u64(argv[4])};
        printf("%llu\n", (unsigned long long)lim_split_wait(
                             t, (uint32_t)arg_u64(argv[5]), (uint32_t)arg_u64(argv[6]),
                             (uint32_t)arg_u64(argv[7]), arg_u64(argv[8]), arg_u64(argv[9]),
                             arg_u64(argv[10])));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "splitbusy") == 0) {
        printf("%llu\n", (unsigned long long)lim_split_busy_until(
                             arg_u64(argv[2]), arg_u64(argv[3]), arg_u64(argv[4])));
        return 0;
    }
    if (argc >= 9 && argc % 4 == 1 && strcmp(argv[1], "longest") == 0) {
        struct lim_longest l = {arg_u64(argv[2]), arg_u64(argv[3]), (uint32_t)arg_u64(argv[4])};
        for (int i = 5; i + 3 < argc; i += 4) {
            l = lim_longest_next(l, arg_u64(argv[i]), arg_u64(argv[i + 1]),
                                 (int)arg_u64(argv[i + 2]), (uint32_t)arg_u64(argv[i + 3]));
            printf("%llu\n", (unsigned long long)l.ns);
        }
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "periodsamples") == 0) {
        printf("%u\n", lim_period_samples((uint32_t)arg_u64(argv[2]), arg_u64(argv[3]),
                                          arg_u64(argv[4]), (uint32_t)arg_u64(argv[5])));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "turnclasskept") == 0) {
        printf("%u\n", lim_turn_class_kept(arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                                           (uint32_t)arg_u64(argv[4])));
        return 0;
    }
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "turnclass") == 0) {
        uint64_t others = argc == 5 ? arg_u64(argv[4]) : 0u;
        printf("%u\n", lim_turn_class(lim_period_longest(arg_u64(argv[2]), others),
                                      (uint32_t)arg_u64(argv[3])));
        return 0;
    }
    if ((argc == 7 || argc == 8) && strcmp(argv[1], "turnwait") == 0) {
        struct lim_turn t = {(uint32_t)arg_u64(argv[2]), (uint32_t)arg_u64(argv[3]),
                             argc == 8 ? (uint32_t)arg_u64(argv[7]) : 40000000u};
        printf("%llu\n", (unsigned long long)lim_turn_wait(t, arg_u64(argv[4]), arg_u64(argv[5]),
                                                          arg_u64(argv[6])));
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "lowqueue") == 0) {
        printf("%llu\n", (unsigned long long)lim_low_queue_wait(arg_u64(argv[2]), arg_u64(argv[3]),
                                                               arg_u64(argv[4])));
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "settle") == 0) {
        uint64_t tat = arg_u64(argv[2]);
        lim_pacer_settle(&tat, arg_u64(argv[3]), arg_u64(argv[4]), (uint32_t)arg_u64(argv[5]));
        printf("%llu\n", (unsigned long long)tat);
        return 0;
    }
    fprintf(stderr, "usage: see the comment at the top of limiter_driver.c\n");
    return 2;
}
