/* The clock model: the NVML clock thread (see clock.h and limiter.h). */
#include "clock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "compute.h"
#include "compute_state.h"
#include "limiter.h"
#include "log.h"
#include "nvml_api.h"
#include "real.h"
#include "region.h"
#include "vgpu_compute.h"

/* ---- tunables (docs/compute.md explains each) ---------------------------------------------- */
#define CLOCK_PERIOD_NS 100000000ull /* NVML clock/utilisation sampling (DVFS correction) */
#define FEEDBACK_SETTLE_NS 1000000000ull /* busy feedback: conditions held this long first */
#define FEEDBACK_EARLY_NS 400000000ull /* ... except one window from here to the settle that may
                                        * only raise the factor: two of the H200's 200-ms NVML
                                        * periods (tests/benchmarks/bench_nvml_lag.py) */
#define FEEDBACK_WINDOW_NS 500000000ull /* busy feedback: the shortest window */
#define FEEDBACK_FIRST_NS 150000000ull /* ... the process's first, from the driver's samples: one
                                        * of their periods (H200: 200 ms), so that the first
                                        * move (the whole way, limiter.h) comes within ~0.5 s */
#define FEEDBACK_WINDOW_KERNELS 16u     /* ... at least this many of the longest kernels' paces */
#define FEEDBACK_WINDOW_MAX_NS 8000000000ull /* ... and at least FEEDBACK_WINDOW_KERNELS
                                             * launches, unless it is this long */
#define SAMPLES_MAX 32u  /* NVML utilisation samples read per call */
#define SAMPLE_PERIOD_MAX_US 1500000ull /* a longer gap between two samples is no one period */

typedef nvmlReturn_t (*nvml_init_fn)(void);
typedef nvmlReturn_t (*nvml_by_uuid_fn)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*nvml_clock_fn)(nvmlDevice_t device, unsigned int type, unsigned int *mhz);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t device, nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*nvml_mw_fn)(nvmlDevice_t device, unsigned int *milliwatts);
typedef nvmlReturn_t (*nvml_samples_fn)(nvmlDevice_t device, nvmlSamplingType_t type,
                                        unsigned long long last_seen, nvmlValueType_t *type_out,
                                        unsigned int *count, nvmlSample_t *samples);
#define NVML_CLOCK_SM_ID 1u /* nvmlClockType_t NVML_CLOCK_SM */

/* A busy-feedback window begins at `t`, with `charged` ns charged so far and `launches` made. */
static void window_open(struct vgpu_cdev *c, uint64_t t, uint64_t charged, uint64_t launches)
{
    c->win_t0 = c->win_prev = t;
    c->win_c0 = charged;
    c->win_l0 = launches;
    c->win_busy = 0;
}

/* One of the driver's utilisation samples: the GPU was busy `pct` % of [from, to] (this
 * process's CLOCK_MONOTONIC, ns). */
struct util_period {
    uint64_t from, to;
    uint32_t pct;
};

/* The clock thread's readings of a device (chg_*, one a tick), by age: the ring slot of the
 * one `age` ticks older than the newest. */
static uint32_t reading(const struct vgpu_cdev *c, uint32_t age)
{
    return (c->chg_n - 1u - age) % VGPU_CS_CHARGED;
}

/* The age of the newest reading taken at or before t (the oldest kept where every one is
 * later); -1 where there is none yet. */
static int reading_at(const struct vgpu_cdev *c, uint64_t t)
{
    uint32_t n = c->chg_n < VGPU_CS_CHARGED ? c->chg_n : VGPU_CS_CHARGED, age = 0;

    if (n == 0)
        return -1;
    while (age + 1u < n && c->chg_t[reading(c, age)] > t)
        age++;
    return (int)age;
}

/* The device's charged_ns at time t, interpolated between the two readings around it. */
static uint64_t charged_at(const struct vgpu_cdev *c, uint64_t t)
{
    int age = reading_at(c, t);
    uint32_t k0, k1;

    if (age < 0)
        return 0;
    k0 = reading(c, (uint32_t)age);
    if (age == 0 || c->chg_t[k0] > t)
        return c->chg_v[k0];
    k1 = reading(c, (uint32_t)age - 1u);
    uint64_t t0 = c->chg_t[k0], v0 = c->chg_v[k0], t1 = c->chg_t[k1], v1 = c->chg_v[k1];
    if (t1 <= t0 || v1 < v0)
        return v0;
    return v0 + (uint64_t)((double)(v1 - v0) * (double)(t - t0) / (double)(t1 - t0));
}

/* The device's launches by time t: those at the newest reading at or before it. */
static uint64_t launches_at(const struct vgpu_cdev *c, uint64_t t)
{
    int age = reading_at(c, t);

    return age < 0 ? 0 : c->chg_l[reading(c, (uint32_t)age)];
}

/* The busy feedback's window length at `limit`: `shortest`, or FEEDBACK_WINDOW_KERNELS paces of
 * the longest kernel when longer (with 100-ms kernels paced at 30 %, a 0.5-s window holds one
 * or two, and its busy share swings by half), at most FEEDBACK_WINDOW_MAX_NS. */
static uint64_t feedback_window(const struct vgpu_cdev *c, uint32_t limit, uint64_t shortest)
{
    uint64_t win = lim_pacer_increment(LD(&c->longest), limit) * FEEDBACK_WINDOW_KERNELS;
    return win < shortest ? shortest : win > FEEDBACK_WINDOW_MAX_NS ? FEEDBACK_WINDOW_MAX_NS : win;
}

/* Whether the open window, `span` ns long with the device's count of launches at `launches`,
 * is long enough to judge: feedback_window() and FEEDBACK_WINDOW_KERNELS launches, or
 * FEEDBACK_WINDOW_MAX_NS.  The count holds where the longest kernel is not known yet (its
 * signature has too few samples, as under CPU contention in the first second): 100-ms kernels
 * judged over 0.5 s, two or three of them charged at launch against NVML's busy time as they
 * run, moved the factor by 5-17 % on the boundaries alone. */
static int window_done(const struct vgpu_cdev *c, uint64_t span, uint64_t launches,
                       uint32_t limit, uint64_t shortest)
{
    return span >= FEEDBACK_WINDOW_MAX_NS ||
           (span >= feedback_window(c, limit, shortest) &&
            launches - c->win_l0 >= FEEDBACK_WINDOW_KERNELS);
}

/* A window judged: the factor moves (limiter.h; the whole way in the process's first one that
 * says anything), logged at debug level. */
static uint32_t feedback_judge(struct vgpu_cdev *c, uint64_t busy, uint64_t charged, uint64_t t0,
                               uint64_t t1)
{
    uint64_t span = t1 - t0;
    int whole = !c->fb_judged;
    uint32_t k;

    if (!lim_feedback_judges(charged, span))
        return c->fb_ppm; /* within LIM_FEEDBACK_MIN/MAX_PPM (clock_sample keeps it so) */
    k = lim_busy_feedback(c->fb_ppm, busy, charged, span, whole);
    c->fb_judged = 1;
    vgpu_log(VGPU_LOG_DEBUG, "compute: device %d: busy feedback over %llu ms from %llu ms after "
             "its conditions began: busy %llu %%, charged %llu %% -> cost scale %u ppm%s",
             (int)(c - vgpu_cs.dev), (unsigned long long)(span / 1000000u),
             (unsigned long long)((t0 - c->fb_since) / 1000000u),
             (unsigned long long)(busy * 100u / span), (unsigned long long)(charged * 100u / span),
             k, whole ? " (the whole way: its first window)" : "");
    return k;
}

/* The busy feedback from the driver's own samples (nvmlDeviceGetSamples), each stamped with the
 * end of its period: a window is whole periods that began after the feedback conditions did,
 * compared with the charges over exactly that span.  Nothing in it predates the conditions, so
 * no settle is needed and each window moves the factor half way, both ways.  The first one
 * waits until some kernel's cost is known (a signature with 4 samples), or FEEDBACK_SETTLE_NS
 * when none is (window_done then asks for FEEDBACK_WINDOW_KERNELS launches): before, launches
 * are charged provisionally, and charged_ns counts them only as their measurements settle
 * them.  A window's launches, like its charges, are counted between its bounds (the clock
 * thread's readings around them), not up to the read: the driver's periods come in after they
 * end, so a first window opened on a period already read had counted none of its launches and
 * waited for the next period (H100, the batch-8 encoder at 70: judged over 400 ms from 142 ms
 * after its conditions began, where 200 were due). */
static void feedback_periods(struct vgpu_cdev *c, const struct util_period *p, unsigned n,
                             uint32_t limit)
{
    for (unsigned i = 0; i < n; i++) {
        if (p[i].from < c->fb_since)
            continue; /* it began before the conditions */
        if (c->win_t0 == 0) {
            if (LD(&c->longest) == 0 && p[i].to - c->fb_since < FEEDBACK_SETTLE_NS)
                continue;
            window_open(c, p[i].from, charged_at(c, p[i].from), launches_at(c, p[i].from));
        }
        c->win_busy += (p[i].to - p[i].from) * p[i].pct / 100u;
        if (window_done(c, p[i].to - c->win_t0, launches_at(c, p[i].to), limit,
                        c->fb_judged ? FEEDBACK_WINDOW_NS : FEEDBACK_FIRST_NS)) {
            uint64_t charged = charged_at(c, p[i].to);
            if (charged >= c->win_c0) /* else bound to the region's block meanwhile */
                c->fb_ppm = feedback_judge(c, c->win_busy, charged - c->win_c0, c->win_t0,
                                           p[i].to);
            c->win_t0 = 0;
        }
    }
}

/* The busy feedback from the utilisation rate (where the driver gives no samples): an average
 * over the driver's last period, read every tick, which lags a change by up to a period or two
 * (up to 1 s each, by NVML's documentation).  So windows of FEEDBACK_WINDOW_NS only after the
 * conditions held FEEDBACK_SETTLE_NS already, after one early window from FEEDBACK_EARLY_NS
 * that may only raise the factor. */
static void feedback_rates(struct vgpu_cdev *c, uint64_t t, uint32_t util, uint32_t limit,
                           uint64_t charged, uint64_t launches)
{
    uint64_t win;

    if (t - c->fb_since < FEEDBACK_EARLY_NS)
        return;
    win = feedback_window(c, limit, FEEDBACK_WINDOW_NS);
    if (c->win_t0 == 0) {
        /* the early window only where a window is short: the longest kernel known (a signature
         * with a few samples) and short.  It ends at the settle, and the regular windows
         * follow */
        if (t - c->fb_since >= FEEDBACK_SETTLE_NS ||
            (win == FEEDBACK_WINDOW_NS && LD(&c->longest) != 0))
            window_open(c, t, charged, launches);
        return;
    }
    int early = c->win_t0 - c->fb_since < FEEDBACK_SETTLE_NS;
    c->win_busy += (t - c->win_prev) * util / 100u;
    c->win_prev = t;
    if (early ? t - c->fb_since >= FEEDBACK_SETTLE_NS
              : window_done(c, t - c->win_t0, launches, limit, FEEDBACK_WINDOW_NS)) {
        /* an early window that long kernels came into meanwhile says nothing */
        uint32_t k = early && win != FEEDBACK_WINDOW_NS
                         ? c->fb_ppm
                         : feedback_judge(c, c->win_busy, charged - c->win_c0, c->win_t0, t);
        /* down only when two regular windows in a row ask for it: the rate can still hold the
         * idle time before a start or a limit change (read as "over-estimated", it would
         * overshoot the limit).  Up at once, the early window too: a stale reading that says
         * "busier than charged" holds the container lower for a window, the safe side. */
        if (k >= c->fb_ppm || (c->fb_down && !early))
            c->fb_ppm = k;
        c->fb_down = !early && k < c->fb_ppm;
        window_open(c, t, charged, launches);
    }
}

/* One clock-thread tick of a device: publish the SM clock kernels run at and f_sat (the cost
 * estimates' DVFS correction, sample by sample), and fold the utilisation (the driver's new
 * samples `p`, or, where it gives none, the rate `util`) into the busy feedback, which is the
 * cost scale. */
static void clock_sample(struct vgpu_cdev *c, uint64_t t, uint32_t mhz, int have_mhz,
                         uint32_t util, uint32_t power_mw, const struct util_period *p,
                         unsigned np)
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
         * its clock to f_sat (limiter.h, clock section; measure.c tags the samples) */
        uint32_t ref = c->sat_mhz ? c->sat_mhz : c->est_mhz, n = LD(&c->nclocks);
        ST(&c->ref_mhz, ref);
        ST(&c->clocks[n % VGPU_CS_CLOCKS],
           (t / 1000000u) << 16 | (lim_clock_tag(mhz, util, ref) & 0xffffu));
        __atomic_store_n(&c->nclocks, n + 1u, __ATOMIC_RELEASE);
    }
    c->chg_t[c->chg_n % VGPU_CS_CHARGED] = t;
    c->chg_v[c->chg_n % VGPU_CS_CHARGED] = charged;
    c->chg_l[c->chg_n % VGPU_CS_CHARGED] = LD(&blk->launches);
    c->chg_n++;
    /* Busy feedback, only while paced at one limit and alone on the GPU (no other container
     * present, not yielding): the busy time is then this container's own. */
    if (limit == 0 || LD(&c->track) || LD(&c->yield) || limit != c->fb_limit ||
        (c->win_t0 != 0 && charged < c->win_c0) /* bound to the region's block meanwhile */) {
        c->fb_since = t;
        c->fb_limit = limit;
        c->win_t0 = 0;
        c->fb_down = 0;
    } else if (c->samples == 1) {
        feedback_periods(c, p, np, limit);
    } else {
        feedback_rates(c, t, util, limit, charged, LD(&blk->launches));
    }
    if (c->fb_ppm < LIM_FEEDBACK_MIN_PPM || c->fb_ppm > LIM_FEEDBACK_MAX_PPM)
        c->fb_ppm = LIM_SCALE_ONE;
    scale = c->fb_ppm;
    ST(&c->scale_ppm, (uint32_t)scale);
    ST(&blk->cost_scale_ppm, (uint32_t)scale);
    ST(&blk->sat_mhz, c->sat_mhz);
}

/* The driver's utilisation samples since the last read, as periods of this process's clock
 * (`now`): sets c->samples to 1 once the driver gives them, 2 where it does not (then the rate
 * is read instead).  Returns the number of periods in p. */
static unsigned read_periods(struct vgpu_cdev *c, nvml_samples_fn samples, uint64_t now,
                             struct util_period *p)
{
    nvmlSample_t buf[SAMPLES_MAX];
    unsigned int n = SAMPLES_MAX, i, np = 0;
    nvmlValueType_t type = NVML_VALUE_TYPE_DOUBLE;
    struct timespec rt;
    int64_t off;
    nvmlReturn_t rc;

    if (samples == NULL || c->samples == 2 || clock_gettime(CLOCK_REALTIME, &rt) != 0) {
        c->samples = 2;
        return 0;
    }
    off = (int64_t)rt.tv_sec * 1000000000LL + rt.tv_nsec - (int64_t)now;
    /* the first read: the last 2 s (the driver keeps more; only the newest matters) */
    rc = samples(c->nvml, NVML_GPU_UTILIZATION_SAMPLES,
                 c->samp_seen ? c->samp_seen
                              : (unsigned long long)(rt.tv_sec - 2) * 1000000ull, &type, &n, buf);
    if (rc == NVML_ERROR_NOT_FOUND) /* nothing new */
        return 0;
    if (rc != NVML_SUCCESS || type != NVML_VALUE_TYPE_UNSIGNED_INT) {
        if (c->samples == 0) {
            c->samples = 2;
            vgpu_log(VGPU_LOG_INFO, "compute: NVML gives no GPU utilisation samples; the busy "
                     "feedback reads the utilisation rate, which lags, and waits for it to "
                     "settle");
        }
        return 0;
    }
    if (c->samples != 1) { /* the rate's window, if one was open, is no window of samples */
        c->samples = 1;
        c->win_t0 = 0;
    }
    for (i = 0; i < n && i < SAMPLES_MAX; i++) {
        unsigned long long ts = buf[i].timeStamp;
        if (ts <= c->samp_seen)
            continue;
        if (c->samp_seen != 0 && ts - c->samp_seen <= SAMPLE_PERIOD_MAX_US &&
            (int64_t)(c->samp_seen * 1000ull) - off > 0) {
            uint32_t v = buf[i].sampleValue.uiVal;
            p[np].from = (uint64_t)((int64_t)(c->samp_seen * 1000ull) - off);
            p[np].to = (uint64_t)((int64_t)(ts * 1000ull) - off);
            p[np].pct = v > 100u ? 100u : v;
            np++;
        }
        c->samp_seen = ts;
    }
    return np;
}

static void *clock_main(void *arg)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml_init_fn init = NULL;
    nvml_by_uuid_fn by_uuid = NULL;
    nvml_clock_fn clk = NULL;
    nvml_util_fn util = NULL;
    nvml_mw_fn power = NULL, power_limit = NULL;
    nvml_samples_fn samples = NULL;
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
        *(void **)&samples = vgpu_real_dlsym(h, "nvmlDeviceGetSamples");
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
    for (d = 0; d < vgpu_cs.ndev; d++) {
        char name[VGPU_UUID_TEXT];
        nvmlDevice_t dev = NULL;
        vgpu_uuid_text(vgpu_cs.dev[d].uuid, name);
        if (by_uuid(name, &dev) == NVML_SUCCESS) {
            unsigned int mw = 0;
            struct vgpu_compute_device *blk =
                __atomic_load_n(&vgpu_cs.dev[d].blk, __ATOMIC_ACQUIRE);
            vgpu_cs.dev[d].nvml = dev;
            if (power_limit != NULL && power_limit(dev, &mw) == NVML_SUCCESS)
                vgpu_cs.dev[d].limit_mw = mw;
            /* an earlier process of the container saw this GPU saturated: start from there */
            vgpu_cs.dev[d].sat_mhz = LD(&blk->sat_mhz);
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
        vgpu_cs_sleep_until(next);
        if (vgpu_compute_now() > next + 10 * CLOCK_PERIOD_NS)
            next = vgpu_compute_now();
        for (d = 0; d < vgpu_cs.ndev; d++) {
            struct vgpu_cdev *c = &vgpu_cs.dev[d];
            unsigned int mhz = 0, mw = 0;
            nvmlUtilization_t ut = {0, 0};
            struct util_period p[SAMPLES_MAX];
            unsigned np;
            uint64_t now;
            int have_mhz;
            if (c->nvml == NULL || util(c->nvml, &ut) != NVML_SUCCESS)
                continue;
            have_mhz = clk != NULL && clk(c->nvml, NVML_CLOCK_SM_ID, &mhz) == NVML_SUCCESS;
            if (power == NULL || power(c->nvml, &mw) != NVML_SUCCESS)
                mw = 0;
            now = vgpu_compute_now();
            np = read_periods(c, samples, now, p);
            clock_sample(c, now, mhz, have_mhz, ut.gpu > 100u ? 100u : ut.gpu, mw, p, np);
        }
    }
    return NULL;
}

void vgpu_clock_start(void)
{
    pthread_t t;
    pthread_attr_t attr;

    vgpu_cs.clock_started = 1;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, clock_main, NULL) != 0)
        vgpu_log(VGPU_LOG_INFO, "compute: cannot start the clock thread; costs are not corrected "
                 "for clock changes (DVFS)");
    pthread_attr_destroy(&attr);
}
