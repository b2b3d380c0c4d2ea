/* The clock model: the NVML clock thread (see clock.h and limiter.h). */
#include "clock.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

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
#define FEEDBACK_WINDOW_KERNELS 16u     /* ... at least this many of the longest kernels' paces */
#define FEEDBACK_WINDOW_MAX_NS 8000000000ull

typedef nvmlReturn_t (*nvml_init_fn)(void);
typedef nvmlReturn_t (*nvml_by_uuid_fn)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*nvml_clock_fn)(nvmlDevice_t device, unsigned int type, unsigned int *mhz);
typedef nvmlReturn_t (*nvml_util_fn)(nvmlDevice_t device, nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*nvml_mw_fn)(nvmlDevice_t device, unsigned int *milliwatts);
#define NVML_CLOCK_SM_ID 1u /* nvmlClockType_t NVML_CLOCK_SM */

/* A busy-feedback window begins at `t`, with `charged` ns charged so far. */
static void window_open(struct vgpu_cdev *c, uint64_t t, uint64_t charged)
{
    c->win_t0 = c->win_prev = t;
    c->win_c0 = charged;
    c->win_busy = 0;
}

/* One clock-thread sample of a device: publish the SM clock kernels run at and f_sat (the cost
 * estimates' DVFS correction, sample by sample), and fold the utilisation into the busy
 * feedback, which is the cost scale. */
static void clock_sample(struct vgpu_cdev *c, uint64_t t, uint32_t mhz, int have_mhz,
                         uint32_t util, uint32_t power_mw)
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
    /* Busy feedback: windows of FEEDBACK_WINDOW_NS, only while paced at one limit and alone on
     * the GPU (no other container present, not yielding) for FEEDBACK_SETTLE_NS already
     * (utilisation is an average over the driver's last period and lags a change), after one
     * early window from FEEDBACK_EARLY_NS that may only raise the factor. */
    if (limit == 0 || LD(&c->track) || LD(&c->yield) || limit != c->fb_limit ||
        (c->win_t0 != 0 && charged < c->win_c0) /* bound to the region's block meanwhile */) {
        c->fb_since = t;
        c->fb_limit = limit;
        c->win_t0 = 0;
        c->fb_down = 0;
    } else if (t - c->fb_since >= FEEDBACK_EARLY_NS) {
        /* a window holds many of the longest kernels: with 100-ms kernels paced at 30 %, a
         * 0.5-s window holds one or two, and its busy share swings by half */
        uint64_t win = lim_pacer_increment(LD(&c->longest), limit) * FEEDBACK_WINDOW_KERNELS;
        win = win < FEEDBACK_WINDOW_NS ? FEEDBACK_WINDOW_NS
              : win > FEEDBACK_WINDOW_MAX_NS ? FEEDBACK_WINDOW_MAX_NS : win;
        if (c->win_t0 == 0) {
            /* the early window only where a window is short: the longest kernel known (a
             * signature with a few samples) and short.  It ends at the settle, and the regular
             * windows follow */
            if (t - c->fb_since >= FEEDBACK_SETTLE_NS ||
                (win == FEEDBACK_WINDOW_NS && LD(&c->longest) != 0))
                window_open(c, t, charged);
        } else {
            int early = c->win_t0 - c->fb_since < FEEDBACK_SETTLE_NS;
            c->win_busy += (t - c->win_prev) * util / 100u;
            c->win_prev = t;
            if (early ? t - c->fb_since >= FEEDBACK_SETTLE_NS : t - c->win_t0 >= win) {
                /* an early window that long kernels came into meanwhile says nothing */
                uint32_t k = early && win != FEEDBACK_WINDOW_NS ? c->fb_ppm
                             : lim_busy_feedback(c->fb_ppm, c->win_busy, charged - c->win_c0,
                                                 t - c->win_t0);
                /* down only when two regular windows in a row ask for it: NVML's utilisation
                 * averages over its own period, which can still hold the idle time before a
                 * start or a limit change (read as "over-estimated", it would overshoot the
                 * limit).  Up at once, the early window too: a stale reading that says "busier
                 * than charged" holds the container lower for a window, the safe side. */
                if (k >= c->fb_ppm || (c->fb_down && !early))
                    c->fb_ppm = k;
                c->fb_down = !early && k < c->fb_ppm;
                window_open(c, t, charged);
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
