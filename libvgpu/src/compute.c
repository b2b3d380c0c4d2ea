/* The compute limiter at run time (see compute.h, limiter.h and docs/compute.md): the
 * per-process state, its configuration (environment once, then the region), initialisation
 * (once per process; again in a forked child), and the gate's entry points, which hand a
 * governed launch to gate.c.  The ticker is in ticker.c, the clock thread in clock.c, the
 * measurements in measure.c. */
#include "compute.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compute_state.h"
#include "core.h"
#include "gate.h"
#include "limiter.h"
#include "log.h"
#include "measure.h"
#include "node.h"
#include "real.h"
#include "region.h"
#include "ticker.h"
#include "vgpu_compute.h"

uint32_t vgpu_compute_word;
struct vgpu_cstate vgpu_cs;

/* 0 none, 1 in progress, 2 done; per process: a forked child's atfork handler sets it back to 0
 * (no getpid() per launch: it is a system call, 125 ns on the H200, on every governed launch) */
static uint32_t g_init_state;

static uint64_t random_nonzero(void)
{
    uint64_t x = vgpu_compute_now() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&vgpu_cs;
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
    vgpu_cs.gate_wait_cfg = LIM_WAIT_AUTO;
    v = getenv("GPUWARDEN_GATE_WAIT");
    if (v != NULL && lim_parse_wait(v, &vgpu_cs.gate_wait_cfg) != 0) {
        vgpu_log(VGPU_LOG_ERROR, "GPUWARDEN_GATE_WAIT='%s' is not a way to wait (valid: sleep, "
                 "yield, auto); using auto", v);
        vgpu_cs.gate_wait_cfg = LIM_WAIT_AUTO;
    }
    ST(&vgpu_cs.gate_wait, vgpu_cs.gate_wait_cfg == LIM_WAIT_YIELD ? LIM_WAIT_YIELD
                                                                 : LIM_WAIT_SLEEP);
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
        vgpu_cs.env_limit[i] = all;
        if (v == NULL)
            continue;
        if (lim_parse_pct(v, &one) == 0) {
            vgpu_cs.env_limit[i] = one;
            continue;
        }
        vgpu_log(VGPU_LOG_ERROR, "%s='%s' is not a percentage (valid: 0..100, 0 = no limit); "
                 "using %s", name, v, all_ok && all ? "CUDA_DEVICE_SM_LIMIT" : "1%");
        if (!all_ok || all == 0)
            vgpu_cs.env_limit[i] = 1;
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
    vgpu_cs.policy = LD(&c->core_policy);
    vgpu_cs.priority = LD(&c->priority);
    vgpu_cs.container_id = LD(&c->container_id);
    if (vgpu_cs.container_id == 0) /* configured by an agent that gave no id */
        vgpu_cs.container_id = random_nonzero();
}

/* A device block: limit_pct from this process's environment if nobody configured it yet. */
static void device_config(struct vgpu_compute_device *b, unsigned ordinal)
{
    uint32_t expect = 0;
    if (__atomic_compare_exchange_n(&b->config_state, &expect, 1u, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        ST(&b->limit_pct, vgpu_cs.env_limit[ordinal]);
}

void vgpu_cs_bind_device(struct vgpu_cdev *c, unsigned ordinal)
{
    int idx = -1;

    if (vgpu_cs.have_region && (int)ordinal < vgpu_core.ndev)
        idx = vgpu_core.entry[ordinal];
    if (idx < 0 && vgpu_cs.have_region)
        idx = vgpu_region_find_device(vgpu_cs.region.r, c->uuid);
    if (idx >= 0) {
        struct vgpu_compute_device *b = &vgpu_cs.region.r->devices[idx].compute;
        device_config(b, ordinal);
        c->region_idx = idx;
        __atomic_store_n(&c->blk, b, __ATOMIC_RELEASE);
    }
}

void vgpu_cs_find_proc_slot(void)
{
    if (vgpu_cs.have_region && vgpu_cs.proc == NULL)
        vgpu_cs.proc = __atomic_load_n(&vgpu_core.slot, __ATOMIC_ACQUIRE);
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
        struct vgpu_cdev *c = &vgpu_cs.dev[d];
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
        ST(&c->local.limit_pct, vgpu_cs.env_limit[d]);
        vgpu_cs_bind_device(c, (unsigned)d);
    }
    vgpu_cs.ndev = n;
}

static void init_once(void)
{
    char why[512];
    const char *path;
    void *h;
    struct vgpu_compute_container local_container;

    memset(&vgpu_cs.dev, 0, sizeof vgpu_cs.dev);
    vgpu_cs.pid = getpid();
    vgpu_cs.proc = NULL;
    vgpu_cs.node = NULL;
    vgpu_cs.clock_started = 0;
    vgpu_cs.last_active_ns = vgpu_compute_now();

    /* The container's region, as the memory side (core.c) opened it. */
    vgpu_cs.have_region = vgpu_core_ready() == 0 && vgpu_core.region.r != NULL;
    if (vgpu_cs.have_region)
        vgpu_cs.region = vgpu_core.region;
    if (vgpu_cs.have_region) {
        container_config(&vgpu_cs.region.r->compute);
    } else {
        memset(&local_container, 0, sizeof local_container);
        container_config(&local_container);
    }

    vgpu_cs.me.owner = random_nonzero();
    vgpu_cs.me.container_id = vgpu_cs.container_id;
    vgpu_cs.me.priority = vgpu_cs.priority;
    vgpu_cs.me.pid = (uint32_t)getpid();
    path = getenv("GPUWARDEN_NODE_REGION");
    if (path == NULL || path[0] == '\0')
        path = "/dev/shm/gpuwarden-node";
    if (strcmp(path, "off") != 0) {
        vgpu_cs.node = vgpu_node_open(path, why, sizeof why);
        if (vgpu_cs.node == NULL)
            vgpu_log(VGPU_LOG_ERROR, "compute: %s; sharing is unknown, so low-priority work is "
                     "held to its gpucores", why);
    }

    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    vgpu_cs.is_capturing = NULL;
    vgpu_cs.exchange_mode = NULL;
    if (h != NULL && vgpu_real_dlsym != NULL) {
        *(void **)&vgpu_cs.is_capturing = vgpu_real_dlsym(h, "cuStreamIsCapturing");
        *(void **)&vgpu_cs.exchange_mode = vgpu_real_dlsym(h, "cuThreadExchangeStreamCaptureMode");
    }

    init_devices();
    vgpu_tick(vgpu_compute_now());

    if (vgpu_ticker_start() != 0) {
        vgpu_log(VGPU_LOG_ERROR, "compute: cannot start the ticker thread; every launch takes "
                 "the gate with the limits of now");
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_GATE, __ATOMIC_RELAXED);
    }
    __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_READY, __ATOMIC_RELEASE);
}

static void at_exit(void)
{
    /* Leave the node region at once: neighbours stop yielding or sharing without waiting for
     * the heartbeat to go stale. */
    int d;
    if (vgpu_cs.node == NULL || vgpu_cs.pid != getpid())
        return;
    vgpu_cs.exiting = 1;
    for (d = 0; d < vgpu_cs.ndev; d++)
        if (vgpu_cs.dev[d].node_slot >= 0)
            vgpu_node_release(vgpu_cs.node, vgpu_cs.dev[d].node_slot, vgpu_cs.me.owner);
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

    if (s == 2u)
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
        __atomic_store_n(&g_init_state, 2u, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != 2u)
        sched_yield();
}

static int capturing(CUstream stream)
{
    int status = 0;
    CUresult rc;

    if (vgpu_cs.is_capturing == NULL)
        return 0;
    rc = vgpu_cs.is_capturing(stream, &status);
    /* IMPLICIT: the legacy stream while another thread captures; the launch itself takes part in
     * (and fails with) that capture, so the gate keeps out of it */
    return (rc == CUDA_SUCCESS && status != 0) || rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

void vgpu_compute_enter(struct vgpu_gate *g, uint64_t key, CUstream stream)
{
    uint32_t w;
    uint64_t now;
    CUdevice d = -1;
    struct vgpu_cdev *c;
    struct vgpu_capture_mode mode = {CU_STREAM_CAPTURE_MODE_RELAXED, 0};

    g->dev = -1;
    g->sample = -1;
    g->est = 0;
    g->provisional_ns = 0;
    g->provisional_pct = 0;
    g->provisional_raw = 0;
    g->unknown = 0;
    g->claimed = 0;
    ensure_init();
    w = LD(&vgpu_compute_word);
    if (!(w & VGPU_COMPUTE_TOUCHED))
        __atomic_fetch_or(&vgpu_compute_word, VGPU_COMPUTE_TOUCHED, __ATOMIC_RELAXED);
    if (vgpu_cu.cuCtxGetDevice == NULL || vgpu_cu.cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0 ||
        d >= vgpu_cs.ndev)
        return;
    c = &vgpu_cs.dev[d];
    now = vgpu_compute_now();
    if (!(w & VGPU_COMPUTE_TOUCHED) && vgpu_cs.node != NULL && c->node_slot >= 0)
        vgpu_node_touch(vgpu_cs.node, c->node_slot, now); /* neighbours see us at their next tick */
    if (!(w & VGPU_COMPUTE_GATE) ||
        (!LD(&c->limit) && !LD(&c->yield) && !LD(&c->track) && !LD(&c->hold)) ||
        capturing(stream))
        return;

    vgpu_gate_pass(g, key, stream, d, now, &mode);
    vgpu_capture_restore(&mode);
}

/* A synchronise that took this long or longer waited for work (one with nothing in flight
 * returns in a few µs), which ended as it returned. */
#define SYNC_WAITED_NS 20000ull

void vgpu_compute_synced(uint64_t from, CUresult rc)
{
    CUdevice d = -1;
    uint64_t now;

    if (rc != CUDA_SUCCESS || __atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != 2u ||
        vgpu_cu.cuCtxGetDevice == NULL || vgpu_cu.cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0 ||
        d >= vgpu_cs.ndev || !LD(&vgpu_cs.dev[d].light))
        return;
    now = vgpu_compute_now();
    if (now - from >= SYNC_WAITED_NS)
        vgpu_claim_runs_on(&vgpu_cs.dev[d], now);
}

void vgpu_compute_leave(struct vgpu_gate *g, CUstream stream, CUresult rc)
{
    struct vgpu_cdev *c;
    uint64_t mark;

    if (g->dev < 0)
        return;
    c = &vgpu_cs.dev[g->dev];
    mark = ADD(&c->submitted, g->est) + g->est;
    if (g->claimed)
        __atomic_fetch_sub(&c->claiming, 1u, __ATOMIC_SEQ_CST);
    if (g->sample < 0)
        return;
    vgpu_measure_end(c, g, stream, rc, mark);
}
