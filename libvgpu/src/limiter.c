/* The compute controller, pure (see limiter.h). */
#include "limiter.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "vgpu_size.h"

/* ---- pacer ------------------------------------------------------------------------------- */

uint64_t lim_pacer_increment(uint64_t cost_ns, uint32_t limit_pct)
{
    if (limit_pct == 0 || limit_pct >= 100)
        return cost_ns;
    if (cost_ns > UINT64_MAX / 100u)
        return UINT64_MAX / 4u; /* absurd cost: pace as "very long", never wrap */
    return cost_ns * 100u / limit_pct;
}

static uint64_t book(uint64_t *tat, uint64_t now_ns, uint64_t cost_ns, uint32_t limit_pct)
{
    uint64_t inc = lim_pacer_increment(cost_ns, limit_pct);
    uint64_t old = __atomic_load_n(tat, __ATOMIC_RELAXED);
    uint64_t base;
    uint64_t next;

    do {
        /* Time not used is lost beyond the tolerance: the credit is bounded. */
        base = old > now_ns ? old : now_ns;
        next = base + inc;
    } while (!__atomic_compare_exchange_n(tat, &old, next, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return base;
}

uint64_t lim_pacer_book(uint64_t *tat, uint64_t now_ns, uint64_t cost_ns, uint32_t limit_pct,
                        uint64_t tolerance_ns)
{
    uint64_t base = book(tat, now_ns, cost_ns, limit_pct);
    return base > now_ns + tolerance_ns ? base - now_ns - tolerance_ns : 0;
}

uint64_t lim_pacer_book_bursty(uint64_t *tat, uint64_t now_ns, uint64_t cost_ns,
                               uint32_t limit_pct, uint64_t tolerance_ns, uint64_t burst_ns)
{
    uint64_t base = book(tat, now_ns, cost_ns, limit_pct);
    uint64_t keep = tolerance_ns - (burst_ns < tolerance_ns ? burst_ns : tolerance_ns);

    return base > now_ns + tolerance_ns ? base - now_ns - keep : 0;
}

void lim_pacer_settle(uint64_t *tat, uint64_t charged_ns, uint64_t cost_ns, uint32_t limit_pct)
{
    uint64_t paid = lim_pacer_increment(charged_ns, limit_pct);
    uint64_t owed = lim_pacer_increment(cost_ns, limit_pct);
    uint64_t old = __atomic_load_n(tat, __ATOMIC_RELAXED), next;

    if (limit_pct == 0 || paid == owed)
        return;
    do {
        if (owed > paid)
            next = old + (owed - paid) < old ? UINT64_MAX / 4u : old + (owed - paid);
        else
            next = old > paid - owed ? old - (paid - owed) : 0;
    } while (!__atomic_compare_exchange_n(tat, &old, next, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

/* ---- turns ----------------------------------------------------------------------------------- */

uint32_t lim_turn_class(uint64_t longest_ns, uint32_t limit_pct)
{
    uint32_t k;

    if (limit_pct == 0)
        return 0;
    for (k = 0; k + 1 < LIM_TURN_CLASSES; k++)
        if ((LIM_TURN_PERIOD_NS << k) * limit_pct / 100u >= LIM_TURN_KERNELS * longest_ns)
            break;
    return k;
}

uint32_t lim_turn_class_kept(uint64_t longest_ns, uint32_t limit_pct, uint32_t current)
{
    uint32_t k = lim_turn_class(longest_ns, limit_pct);
    uint32_t kept = lim_turn_class(longest_ns + longest_ns / LIM_TURN_CLASS_MARGIN, limit_pct);

    if (kept > current)
        kept = current;
    return k > kept ? k : kept;
}

_Static_assert(LIM_PERIOD_SAMPLES <= LIM_COST_SAMPLES, "an estimate has at most LIM_COST_SAMPLES "
                                                    "samples");

uint64_t lim_period_longest(uint64_t own_ns, uint64_t others_ns)
{
    return own_ns != 0 ? own_ns : others_ns;
}

struct lim_longest lim_longest_next(struct lim_longest l, uint64_t key, uint64_t charge_ns,
                                    int settled, uint32_t light)
{
    if (settled && (charge_ns > l.ns || (l.light && key == l.key && charge_ns < l.ns)))
        return (struct lim_longest){charge_ns, key, light};
    l.ns -= l.ns / LIM_LONGEST_DECAY;
    return l;
}

uint32_t lim_period_samples(uint32_t light, uint64_t light_left_ns, uint64_t now_ns,
                            uint32_t young)
{
    /* (the ticker may mark it after a launch read the clock: no difference taken) */
    int lately = light || (light_left_ns != 0 && now_ns < light_left_ns + LIM_PERIOD_LIGHT_NS);
    return lately && young < LIM_PERIOD_SAMPLES ? LIM_PERIOD_SAMPLES : young;
}

void lim_turn_merge(struct lim_turn_member *set, uint32_t *n, uint32_t max,
                    struct lim_turn_member m)
{
    uint32_t j;

    if (m.id == 0 || m.limit_pct == 0 || m.limit_pct >= 100)
        return;
    for (j = 0; j < *n && set[j].id != m.id; j++)
        ;
    if (j == *n) {
        if (*n < max)
            set[(*n)++] = m;
        return;
    }
    if (m.limit_pct > set[j].limit_pct)
        set[j].limit_pct = m.limit_pct;
    if (m.period_class > set[j].period_class)
        set[j].period_class = m.period_class;
    if (m.longest_ns > set[j].longest_ns)
        set[j].longest_ns = m.longest_ns;
    if (m.capped)
        set[j].capped = 1;
    if (m.rest)
        set[j].rest = 1;
}

/* A share's part of the GPU, part / *total, among shares whose caps add up to `caps` and whose
 * weights to `weights`: under 100 in all, a cap as it is and a weight in proportion of what the
 * caps leave; caps alone, as they are; from 100 on, every share in proportion.  The one rule
 * behind lim_turn_window's windows and lim_share_scaled's paces. */
static uint64_t share_part(uint32_t share, int capped, uint32_t caps, uint32_t weights,
                           uint64_t *total)
{
    if (caps + weights >= 100 || weights == 0) {
        *total = caps + weights >= 100 ? caps + weights : 100u;
        return share;
    }
    *total = 100u * weights;
    return (uint64_t)share * (capped ? weights : 100u - caps);
}

struct lim_turn lim_turn_window(const struct lim_turn_member *m, uint32_t n, uint64_t me)
{
    struct lim_turn_member u[LIM_TURN_MAX];
    struct lim_turn t = {0, 0, LIM_TURN_PERIOD_NS};
    uint64_t total, before = 0, mypart, period;
    uint32_t nu = 0, i, mine = LIM_TURN_MAX, cls = 0, capped = 0, weights = 0;

    for (i = 0; i < n; i++)
        lim_turn_merge(u, &nu, LIM_TURN_MAX, m[i]);
    for (i = 0; i < nu; i++) {
        if (u[i].capped)
            capped += u[i].limit_pct;
        else
            weights += u[i].limit_pct;
        if (u[i].id == me)
            mine = i;
        if (u[i].period_class > cls)
            cls = u[i].period_class;
    }
    if (nu < 2 || mine == LIM_TURN_MAX)
        return t;
    if (cls >= LIM_TURN_CLASSES)
        cls = LIM_TURN_CLASSES - 1;
    for (i = 0; i < nu; i++)
        if (u[i].id < me)
            before += share_part(u[i].limit_pct, (int)u[i].capped, capped, weights, &total);
    mypart = share_part(u[mine].limit_pct, (int)u[mine].capped, capped, weights, &total);
    period = LIM_TURN_PERIOD_NS << cls;
    t.period_ns = (uint32_t)period;
    t.off_ns = (uint32_t)(period * before / total);
    t.len_ns = (uint32_t)(period * (before + mypart) / total) - t.off_ns;
    return t;
}

uint64_t lim_turn_wait(struct lim_turn t, uint64_t now_ns, uint64_t queued_ns, uint64_t cost_ns)
{
    uint64_t rel, period = t.period_ns;

    if (t.len_ns == 0 || period == 0)
        return 0;
    rel = (now_ns % period + period - t.off_ns) % period;
    if (rel < t.len_ns) {
        uint64_t left = t.len_ns - rel;
        if (queued_ns + cost_ns <= left + cost_ns / 2u)
            return 0;
        if (cost_ns > t.len_ns && queued_ns == 0 && rel < t.len_ns / 2)
            return 0;
    }
    return period - rel;
}

struct lim_turn lim_turn_split(struct lim_turn t, uint32_t rank, uint32_t n)
{
    uint32_t from, to;

    if (n < 2 || rank >= n || t.len_ns == 0)
        return t;
    from = (uint32_t)((uint64_t)t.len_ns * rank / n);
    to = (uint32_t)((uint64_t)t.len_ns * (rank + 1u) / n);
    t.off_ns += from;
    t.len_ns = to - from;
    return t;
}

uint64_t lim_split_wait(struct lim_turn t, uint32_t rank, uint32_t n, uint32_t idle,
                        uint64_t now_ns, uint64_t queued_ns, uint64_t cost_ns)
{
    uint64_t rel, period = t.period_ns;
    uint32_t cur, last;

    if (n < 2 || n > LIM_SPLIT_MAX || rank >= n || t.len_ns == 0 || period == 0)
        return lim_turn_wait(t, now_ns, queued_ns, cost_ns);
    rel = (now_ns % period + period - t.off_ns) % period;
    if (rel < t.len_ns) {
        for (cur = 0; cur + 1 < n && rel >= lim_turn_split(t, cur + 1u, n).off_ns - t.off_ns;
             cur++)
            ;
        if (cur == rank || (idle >> cur & 1u)) {
            struct lim_turn run = lim_turn_split(t, cur, n), end;
            for (last = cur; last + 1 < n && (last + 1 == rank || (idle >> (last + 1) & 1u));
                 last++)
                ;
            end = lim_turn_split(t, last, n);
            run.len_ns = end.off_ns + end.len_ns - run.off_ns;
            if (lim_turn_wait(run, now_ns, queued_ns, cost_ns) == 0)
                return 0;
        }
    }
    return lim_turn_wait(lim_turn_split(t, rank, n), now_ns, queued_ns, cost_ns);
}

uint64_t lim_split_busy_until(uint64_t horizon_ns, uint64_t longest_ns, uint64_t gap_ns)
{
    uint64_t kernel = longest_ns > LIM_SPLIT_LONGEST_NS ? longest_ns : LIM_SPLIT_LONGEST_NS;

    if (gap_ns >= kernel)
        return horizon_ns;
    return horizon_ns > UINT64_MAX - kernel ? UINT64_MAX : horizon_ns + kernel;
}

/* ---- clock (DVFS) correction ------------------------------------------------------------------ */

uint32_t lim_clock_scale_ppm(uint32_t f_now_mhz, uint32_t f_sat_mhz)
{
    double r;

    if (f_now_mhz == 0 || f_sat_mhz == 0 || f_now_mhz <= f_sat_mhz)
        return LIM_SCALE_ONE;
    r = pow((double)f_now_mhz / f_sat_mhz, LIM_CLOCK_ALPHA);
    if (r > 16.0) /* absurd readings: at most 16x */
        return 16u * LIM_SCALE_ONE;
    return (uint32_t)(r * LIM_SCALE_ONE);
}

uint32_t lim_sat_update(uint32_t f_sat_mhz, uint32_t f_now_mhz, uint32_t util_pct)
{
    if (util_pct < LIM_SAT_UTIL_PCT || f_now_mhz == 0)
        return f_sat_mhz;
    if (f_sat_mhz == 0)
        return f_now_mhz;
    if (f_now_mhz < f_sat_mhz)
        return (uint32_t)(((uint64_t)f_sat_mhz + f_now_mhz) / 2u);
    return (uint32_t)(((uint64_t)f_sat_mhz * 7u + f_now_mhz + 7u) / 8u);
}

uint32_t lim_clock_tag(uint32_t f_mhz, uint32_t util_pct, uint32_t ref_mhz)
{
    if (ref_mhz != 0)
        return f_mhz >= ref_mhz ? f_mhz : 0u;
    return util_pct >= LIM_EST_MIN_UTIL_PCT ? f_mhz : 0u;
}

uint32_t lim_sat_estimate(uint32_t f_now_mhz, uint32_t power_mw, uint32_t util_pct,
                          uint32_t limit_mw)
{
    double p_static, p_sat, f;

    if (f_now_mhz == 0 || power_mw == 0 || limit_mw == 0 || util_pct < LIM_EST_MIN_UTIL_PCT ||
        util_pct >= LIM_SAT_UTIL_PCT)
        return 0;
    p_static = (double)limit_mw * LIM_EST_STATIC_PERMILLE / 1000.0;
    p_sat = power_mw > p_static ? p_static + (power_mw - p_static) * 100.0 / util_pct
                                : (double)power_mw;
    if (p_sat <= (double)limit_mw)
        return f_now_mhz;
    f = (double)f_now_mhz * pow((double)limit_mw / p_sat, LIM_EST_CLOCK_EXP);
    return f < f_now_mhz / 2u ? f_now_mhz / 2u : (uint32_t)f;
}

int lim_feedback_judges(uint64_t charged_ns, uint64_t window_ns)
{
    return window_ns != 0 && charged_ns * 100u >= window_ns * LIM_FEEDBACK_MIN_SHARE_PCT;
}

uint32_t lim_busy_feedback(uint32_t k_ppm, uint64_t busy_ns, uint64_t charged_ns,
                           uint64_t window_ns, int whole)
{
    uint64_t sample, res = window_ns / 100u; /* NVML reports whole percent */

    if (k_ppm < LIM_FEEDBACK_MIN_PPM)
        k_ppm = LIM_FEEDBACK_MIN_PPM;
    if (k_ppm > LIM_FEEDBACK_MAX_PPM)
        k_ppm = LIM_FEEDBACK_MAX_PPM;
    if (!lim_feedback_judges(charged_ns, window_ns))
        return k_ppm;
    if (busy_ns > UINT64_MAX / LIM_SCALE_ONE)
        sample = LIM_FEEDBACK_MAX_PPM;
    else if (busy_ns > charged_ns + res)
        sample = (busy_ns - res) * LIM_SCALE_ONE / charged_ns;
    else if (busy_ns < charged_ns)
        sample = busy_ns * LIM_SCALE_ONE / charged_ns;
    else
        sample = LIM_SCALE_ONE;
    if (sample < LIM_FEEDBACK_MIN_PPM)
        sample = LIM_FEEDBACK_MIN_PPM;
    if (sample > LIM_FEEDBACK_MAX_PPM)
        sample = LIM_FEEDBACK_MAX_PPM;
    /* charged_ns is the estimates before any factor: the sample is the factor itself */
    return whole ? (uint32_t)sample : (uint32_t)(((uint64_t)k_ppm + sample) / 2u);
}

uint64_t lim_scale_cost(uint64_t cost_ns, uint32_t scale_ppm)
{
    if (scale_ppm == LIM_SCALE_ONE)
        return cost_ns;
    if (cost_ns > UINT64_MAX / 16u / LIM_SCALE_ONE)
        return UINT64_MAX / 4u;
    return cost_ns * scale_ppm / LIM_SCALE_ONE;
}

/* ---- cost estimates ---------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t lim_cost_key(uint64_t fn, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                      uint32_t bz, uint32_t shmem)
{
    uint64_t h = mix64(fn + 0x9e3779b97f4a7c15ull);
    h = mix64(h ^ (((uint64_t)gx << 32) | gy));
    h = mix64(h ^ (((uint64_t)gz << 32) | bx));
    h = mix64(h ^ (((uint64_t)by << 32) | bz));
    h = mix64(h ^ shmem);
    return h ? h : 1u;
}

uint64_t lim_lowest(const uint64_t *v, uint32_t n)
{
    uint64_t low;
    uint32_t i;

    if (n == 0)
        return 0;
    if (n > LIM_COST_SAMPLES)
        n = LIM_COST_SAMPLES;
    low = v[0];
    for (i = 1; i < n; i++)
        if (v[i] < low)
            low = v[i];
    return low;
}

int lim_sample_due(uint64_t n, uint64_t *next)
{
    uint64_t z;

    if (n < *next) /* the common case: one compare */
        return 0;
    z = mix64(n * 0x9E3779B97F4A7C15ull); /* splitmix64's finaliser: no stride survives it */
    *next = n + LIM_SAMPLE_GAP_MIN + (z >> 59); /* 16 + [0, 32): 16..47, mean 31.5 */
    return 1;
}

uint64_t lim_cost_estimate(const struct lim_cost_table *t, uint64_t key, int *known,
                           uint64_t *raw_ns)
{
    uint32_t i;

    for (i = 0; i < LIM_COST_PROBES; i++) {
        const struct lim_cost_entry *e = &t->slot[(key + i) & (LIM_COST_SLOTS - 1)];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
        if (k == key) {
            uint32_t n = __atomic_load_n(&e->count, __ATOMIC_RELAXED);
            *known = n == 0 ? 1 : n < LIM_COST_SAMPLES ? (int)n : (int)LIM_COST_SAMPLES;
            if (raw_ns != NULL)
                *raw_ns = __atomic_load_n(&e->raw_ns, __ATOMIC_RELAXED);
            return __atomic_load_n(&e->est_ns, __ATOMIC_RELAXED);
        }
        if (k == 0)
            break;
    }
    *known = 0;
    if (raw_ns != NULL)
        *raw_ns = __atomic_load_n(&t->fallback_raw_ns, __ATOMIC_RELAXED);
    return __atomic_load_n(&t->fallback_ns, __ATOMIC_RELAXED);
}

static struct lim_cost_entry *cost_slot(struct lim_cost_table *t, uint64_t key)
{
    struct lim_cost_entry *victim = &t->slot[key & (LIM_COST_SLOTS - 1)];
    uint32_t i;

    for (i = 0; i < LIM_COST_PROBES; i++) {
        struct lim_cost_entry *e = &t->slot[(key + i) & (LIM_COST_SLOTS - 1)];
        uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
        if (k == key)
            return e;
        if (k == 0) {
            victim = e;
            break;
        }
    }
    /* New key (or a full neighbourhood: the home slot is recycled). */
    __atomic_store_n(&victim->key, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&victim->count, 0, __ATOMIC_RELAXED);
    victim->next = 0;
    return victim;
}

/* The estimate of an entry whose window holds n samples (lim_cost_sample): *raw_ns gets the
 * sample it comes from, as measured. */
static uint64_t cost_of_window(const struct lim_cost_entry *e, uint32_t n, uint32_t sat_mhz,
                               uint64_t *raw_ns)
{
    uint64_t v[LIM_COST_SAMPLES], raw[LIM_COST_SAMPLES];
    uint64_t span = 0;
    uint32_t i, m = 0, tagged = 0, lo_new = 0, lo_old = 0, rise;

    for (i = 0; i < n; i++)
        tagged |= e->mhz[i] != 0;
    for (i = 0; i < n; i++) { /* newest first */
        uint32_t j = (e->next + LIM_COST_SAMPLES - 1u - i) % LIM_COST_SAMPLES;
        if (tagged && e->mhz[j] == 0)
            continue;
        raw[m] = e->samples[j];
        v[m++] = lim_scale_cost(e->samples[j], lim_clock_scale_ppm(e->mhz[j], sat_mhz));
    }
    /* the newest samples that span LIM_COST_RISE_SPAN_NS, LIM_COST_RISE_SAMPLES at least:
     * `rise` of them (all of them, and more, where the window's do not) */
    for (i = 0; i < m; i++) {
        span += v[i];
        if (i + 1u >= LIM_COST_RISE_SAMPLES && span >= LIM_COST_RISE_SPAN_NS)
            break;
    }
    rise = i + 1u;
    for (i = 1; i < m; i++) {
        if (i < rise) {
            if (v[i] < v[lo_new])
                lo_new = i;
        } else if (i == rise || v[i] < v[lo_old]) {
            lo_old = i;
        }
    }
    /* the newest all rose: the kernel got slower, follow it; else the smallest of all */
    if (rise >= m ||
        (v[lo_old] <= UINT64_MAX / (100u + LIM_COST_RISE_PCT) &&
         v[lo_new] * 100u > v[lo_old] * (100u + LIM_COST_RISE_PCT)) ||
        v[lo_new] <= v[lo_old]) {
        *raw_ns = raw[lo_new];
        return v[lo_new];
    }
    *raw_ns = raw[lo_old];
    return v[lo_old];
}

uint32_t lim_cost_sample(struct lim_cost_table *t, uint64_t key, uint64_t sample_ns, uint32_t mhz,
                         uint32_t sat_mhz)
{
    struct lim_cost_entry *e = cost_slot(t, key);
    uint32_t n;
    uint64_t fb, est, raw = 0;

    e->samples[e->next] = sample_ns;
    e->mhz[e->next] = mhz;
    e->next = (e->next + 1) % LIM_COST_SAMPLES;
    if (e->count < UINT32_MAX)
        __atomic_store_n(&e->count, e->count + 1u, __ATOMIC_RELAXED);
    n = e->count < LIM_COST_SAMPLES ? e->count : LIM_COST_SAMPLES;
    est = cost_of_window(e, n, sat_mhz, &raw);
    __atomic_store_n(&e->est_ns, est, __ATOMIC_RELAXED);
    __atomic_store_n(&e->raw_ns, raw, __ATOMIC_RELAXED);
    __atomic_store_n(&e->key, key, __ATOMIC_RELEASE);

    fb = __atomic_load_n(&t->fallback_raw_ns, __ATOMIC_RELAXED);
    fb = fb == 0 ? sample_ns : fb - fb / 8u + sample_ns / 8u;
    __atomic_store_n(&t->fallback_raw_ns, fb, __ATOMIC_RELAXED);
    sample_ns = lim_scale_cost(sample_ns, lim_clock_scale_ppm(mhz, sat_mhz));
    fb = __atomic_load_n(&t->fallback_ns, __ATOMIC_RELAXED);
    fb = fb == 0 ? sample_ns : fb - fb / 8u + sample_ns / 8u;
    __atomic_store_n(&t->fallback_ns, fb, __ATOMIC_RELAXED);
    return e->count;
}

/* ---- the policy / priority table ----------------------------------------------------------- */

uint32_t lim_share_scaled(uint32_t share_pct, uint32_t others_pct, uint32_t others_capped_pct)
{
    uint64_t total, part;

    if (share_pct == 0 || share_pct + others_pct >= 100)
        return share_pct; /* over 100 the windows hold each one to its part */
    part = share_part(share_pct, 0, others_capped_pct, share_pct + others_pct - others_capped_pct,
                      &total);
    return (uint32_t)((100u * part + total - 1u) / total); /* rounded up */
}

uint32_t lim_rest_share(uint32_t configured_pct, uint32_t others_rest)
{
    uint32_t left = configured_pct < 100u ? (100u - configured_pct) / (others_rest + 1u) : 0u;

    return left > LIM_REST_MIN_PCT ? left : LIM_REST_MIN_PCT;
}

int lim_may_take_rest(const struct lim_view *v)
{
    return v->policy == LIM_POLICY_DEFAULT && v->priority == LIM_PRIORITY_LOW &&
           (v->limit_pct == 0 || v->limit_pct >= 100) && v->agent_limit_pct == 0 &&
           v->node_known;
}

struct lim_verdict lim_decide(const struct lim_view *v)
{
    struct lim_verdict out = {0, 0, 0, 0, 0};
    uint32_t sharing = !v->node_known || v->others_high + v->others_low > 0;
    int weight = 0; /* the share is a weight (`default`), not a cap */

    switch (v->policy) {
    case LIM_POLICY_DISABLE:
        break;
    case LIM_POLICY_FORCE:
        out.limit_pct = v->limit_pct;
        out.yield = v->priority == LIM_PRIORITY_LOW && v->others_high > 0;
        break;
    default: /* LIM_POLICY_DEFAULT: the seed's semantics */
        if (lim_may_take_rest(v)) { /* beside containers paced by theirs: what those leave */
            if (v->others_paced > v->others_rest)
                out.limit_pct = lim_rest_share(v->others_paced_pct - v->others_rest_pct +
                                                   v->others_light_pct,
                                               v->others_rest + v->others_light_rest);
            else if (v->light && v->others_low > 0) /* they wait for its claims */
                out.limit_pct = v->rest_pct;
            out.rest = out.limit_pct != 0;
        } else if (v->priority == LIM_PRIORITY_LOW &&
                   (sharing || (v->light && v->others_light > 0))) {
            out.limit_pct = v->limit_pct;
        }
        weight = 1;
        /* a busy high one makes a low yield (out of the turns, its pace cut short).  A light
         * neighbour claims the GPU like a high one, and a low (unless light itself) waits for
         * its claims launch by launch (the claimers list, ticker.c), but does not yield: its
         * claims last a request and 0.4 ms each, and a tick that fell in one took the low out
         * of the turns for 10 ms, and the other members' windows with it (simulated GPU,
         * 30 + 50 beside a light 20: 0.910-0.955 of the GPU used, now 0.964-0.970) */
        out.yield = v->priority == LIM_PRIORITY_LOW && v->others_high > 0;
        break;
    }
    if (v->agent_limit_pct == LIM_AGENT_UNLIMITED) {
        out.limit_pct = 0;
    } else if (v->agent_limit_pct >= 1 && v->agent_limit_pct <= 100) {
        /* the agent's plan (agent/decide.py, core_plan) writes the gpucores of a container
         * that shares: under `default` a weight still, under `force` a cap */
        out.limit_pct = v->agent_limit_pct;
    }
    if (v->agent_yield == LIM_AGENT_YIELD)
        out.yield = 1;
    else if (v->agent_yield == LIM_AGENT_RUN)
        out.yield = 0;
    if (out.limit_pct >= 100)
        out.limit_pct = 0;
    out.share_pct = out.limit_pct;
    out.capped = out.share_pct != 0 && !weight;
    /* a weight: among paced containers (the turns' members), with every active low one of
     * them, what their shares leave of the GPU goes to the weighted ones in proportion (beside
     * an active low outside them, one not paced yet, they keep their shares; beside highs or
     * light ones alone, a low keeps its share too) */
    if (weight && v->node_known && v->others_paced > 0 && v->others_paced >= v->others_low)
        out.limit_pct = lim_share_scaled(out.limit_pct, v->others_paced_pct,
                                         v->others_capped_pct); /* under 100: the others have
                                                                 * 1 at least each */
    return out;
}

/* ---- light containers ------------------------------------------------------------------------ */

/* An average share in hundredths of a percent after one sample of `part` over `whole` (0:
 * unchanged), moving 1/`weight` of the way (also lim_cpu_wait_avg's). */
static uint32_t share_avg(uint32_t avg_x100, uint64_t part, uint64_t whole, uint32_t weight)
{
    if (whole == 0)
        return avg_x100;
    uint64_t sample = part >= whole ? 10000u : (uint64_t)((double)part * 1e4 / (double)whole);
    int64_t avg = (int64_t)avg_x100;
    avg += ((int64_t)sample - avg) / (int64_t)weight;
    return (uint32_t)avg;
}

uint32_t lim_use_avg(uint32_t use_x100, uint64_t charged_ns, uint64_t wall_ns)
{
    return share_avg(use_x100, charged_ns, wall_ns, LIM_USE_WEIGHT);
}

uint32_t lim_waited_avg(uint32_t waited_x100, uint64_t waited_ns, uint64_t wall_ns)
{
    return share_avg(waited_x100, waited_ns, wall_ns, LIM_WAITED_WEIGHT);
}

struct lim_idle lim_idle_avg(struct lim_idle a, uint64_t charged_ns, uint64_t waited_ns,
                             uint64_t wall_ns)
{
    if (waited_ns >= wall_ns)
        return a;
    uint64_t free = wall_ns - waited_ns;
    if (a.free_ns == 0) /* no history: a span free and filled */
        a.free_ns = a.charged_ns = LIM_IDLE_SPAN_NS;
    /* what the sums keep: the span's part that this tick's free time does not take */
    double keep = free >= LIM_IDLE_SPAN_NS ? 0.0 : 1.0 - (double)free / (double)LIM_IDLE_SPAN_NS;
    a.free_ns = (uint64_t)((double)a.free_ns * keep) + free;
    a.charged_ns = (uint64_t)((double)a.charged_ns * keep) + charged_ns;
    return a;
}

uint32_t lim_idle_share(struct lim_idle a)
{
    if (a.charged_ns >= a.free_ns)
        return 0;
    return (uint32_t)((double)(a.free_ns - a.charged_ns) * 1e4 / (double)a.free_ns);
}

enum lim_hold lim_held_back(uint32_t waited_x100, uint64_t longest_ns, struct lim_claim claim)
{
    int request = claim.gap_ns < LIM_LIGHT_RUN_GAP_NS &&
                  claim.charged_ns * 100u >= claim.run_ns * LIM_LIGHT_RUN_BUSY_PCT;

    if (claim.run_ns >= LIM_LIGHT_BURST_NS || (claim.run_ns >= LIM_LIGHT_RUN_MAX_NS && !request))
        return LIM_HOLD_RUN;
    if (longest_ns >= LIM_LIGHT_WAIT_LONGEST_NS && waited_x100 >= LIM_LIGHT_WAIT_LEAVE_PCT * 100u)
        return LIM_HOLD_PACE;
    return LIM_HOLD_NONE;
}

uint32_t lim_light(uint32_t was_light, uint32_t use_x100, uint32_t idle_x100, int held_back,
                   uint32_t limit_pct, uint64_t since_ns)
{
    if (limit_pct == 0 || limit_pct >= 100 || since_ns < LIM_LIGHT_SETTLE_NS)
        return 0;
    if (was_light)
        return use_x100 < limit_pct * LIM_LIGHT_LEAVE_PCT &&
               idle_x100 >= LIM_LIGHT_IDLE_LEAVE_PCT * 100u &&
               !held_back;
    return use_x100 < limit_pct * LIM_LIGHT_ENTER_PCT &&
           idle_x100 >= LIM_LIGHT_IDLE_ENTER_PCT * 100u;
}

uint64_t lim_light_tolerance(uint64_t gap_ns, uint32_t limit_pct)
{
    return gap_ns < LIM_LIGHT_RUN_GAP_NS ? lim_pacer_increment(LIM_LIGHT_BURST_NS, limit_pct) : 0u;
}

uint64_t lim_run_backoff(uint64_t last_ns, uint64_t light_ns)
{
    if (last_ns == 0 || light_ns >= LIM_LIGHT_RUN_FORGET_NS)
        return LIM_LIGHT_SETTLE_NS;
    return last_ns >= LIM_LIGHT_RUN_SETTLE_MAX_NS / 2u ? LIM_LIGHT_RUN_SETTLE_MAX_NS
                                                       : 2u * last_ns;
}

/* ---- priority: a low one's queue beside a claiming high ------------------------------------- */

uint64_t lim_low_queue_wait(uint64_t queued_ns, uint64_t cost_ns, uint64_t bound_ns)
{
    uint64_t keep = bound_ns / 2u; /* the queue a launch may go on top of */

    if (cost_ns < bound_ns && bound_ns - cost_ns > keep)
        keep = bound_ns - cost_ns;
    return queued_ns > keep ? queued_ns - keep : 0;
}

/* ---- environment values --------------------------------------------------------------------- */

int lim_parse_pct(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    const char *p = s;

    if (s == NULL || *s == '\0')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10u + (uint32_t)(*p - '0');
        if (v > 100u)
            return -1;
    }
    if (p == s)
        return -1;
    if (*p == '%')
        p++;
    if (*p != '\0')
        return -1;
    *out = v;
    return 0;
}

/* The index in `words` (of enum values 0..n-1) of `s`, any case, into *out; -1 if none. */
static int parse_word(const char *s, const char *const *words, uint32_t n, uint32_t *out)
{
    for (uint32_t i = 0; s != NULL && i < n; i++)
        if (strcasecmp(s, words[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

int lim_parse_policy(const char *s, uint32_t *out)
{
    static const char *const words[] = {[LIM_POLICY_DEFAULT] = "default",
                                        [LIM_POLICY_FORCE] = "force",
                                        [LIM_POLICY_DISABLE] = "disable"};
    return parse_word(s, words, sizeof words / sizeof words[0], out);
}

int lim_parse_wait(const char *s, uint32_t *out)
{
    static const char *const words[] = {
        [LIM_WAIT_SLEEP] = "sleep", [LIM_WAIT_YIELD] = "yield", [LIM_WAIT_AUTO] = "auto"};
    return parse_word(s, words, sizeof words / sizeof words[0], out);
}

uint32_t lim_wait_choose(uint32_t now_yielding, uint32_t cpu_wait_x100, uint64_t now_ns,
                         uint64_t throttled_at_ns)
{
    int throttled = throttled_at_ns != 0 && now_ns - throttled_at_ns < LIM_THROTTLE_HOLD_NS;
    if (throttled || cpu_wait_x100 < LIM_WAIT_SLEEP_BELOW)
        return LIM_WAIT_SLEEP;
    if (cpu_wait_x100 >= LIM_WAIT_YIELD_FROM)
        return LIM_WAIT_YIELD;
    return now_yielding == LIM_WAIT_YIELD ? LIM_WAIT_YIELD : LIM_WAIT_SLEEP;
}

uint32_t lim_cpu_wait_avg(uint32_t avg_x100, uint64_t delay_ns, uint64_t wall_ns)
{
    return share_avg(avg_x100, delay_ns, wall_ns, LIM_CPU_WAIT_WEIGHT);
}

int lim_parse_schedstat(const char *text, uint64_t *delay_ns)
{
    const char *p = text;
    uint64_t run, delay, slices;
    if (p == NULL || vgpu_parse_u64(&p, &run) != 0 || *p++ != ' ' ||
        vgpu_parse_u64(&p, &delay) != 0 || *p++ != ' ' || vgpu_parse_u64(&p, &slices) != 0 ||
        (*p != '\n' && *p != '\0'))
        return -1;
    *delay_ns = delay;
    return 0;
}

int lim_parse_nr_throttled(const char *text, uint64_t *n)
{
    static const char key[] = "nr_throttled ";
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *p = line + sizeof key - 1;
        if (strncmp(line, key, sizeof key - 1) == 0 && vgpu_parse_u64(&p, n) == 0 &&
            (*p == '\n' || *p == '\0'))
            return 0;
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    return -1;
}

int lim_cgroup2_path(const char *text, char *out, size_t size)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        if (len >= 4 && strncmp(line, "0::/", 4) == 0) {
            if (len - 3 >= size)
                return -1;
            memcpy(out, line + 3, len - 3);
            out[len - 3] = '\0';
            return 0;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return -1;
}

int lim_parse_priority(const char *s, uint32_t *out)
{
    if (s == NULL || (s[0] != '0' && s[0] != '1') || s[1] != '\0')
        return -1;
    *out = (uint32_t)(s[0] - '0');
    return 0;
}
