/* compute.h: the compute limiter at run time as the hooks of hooks_launch.c see it
 * (docs/compute.md): the fast-path word and the launch gate's entry points.  Behind them:
 * compute.c (initialisation, configuration, the entry points), gate.c (the gate proper: yield,
 * queue bound, pacer), measure.c (the GPU-time measurements that feed the cost estimates of
 * limiter.c), ticker.c (the per-process ticker that follows the node region and the container
 * region) and clock.c (the NVML clock thread: DVFS correction, busy feedback); their shared
 * state is in compute_state.h.
 *
 * Fast path: one relaxed load of vgpu_compute_word.  When it reads VGPU_COMPUTE_FAST, the hook
 * calls the real entry point and nothing else: the process is initialised, its launches were
 * already seen this tick, and no device of the process is paced or yielding.  Any other value
 * takes the gate (vgpu_compute_enter/leave), which may sleep. */
#ifndef VGPU_COMPUTE_RT_H
#define VGPU_COMPUTE_RT_H

#include <stdint.h>
#include <time.h>

#include "cuda_api.h"
#include "real.h"

#define VGPU_COMPUTE_READY   0x1u /* initialised, ticker running */
#define VGPU_COMPUTE_TOUCHED 0x2u /* a launch happened since the last tick */
#define VGPU_COMPUTE_GATE    0x4u /* some device is paced or yielding */
#define VGPU_COMPUTE_FAST    (VGPU_COMPUTE_READY | VGPU_COMPUTE_TOUCHED)

extern uint32_t vgpu_compute_word;

static inline int vgpu_compute_fast(void)
{
    return (int)__builtin_expect(
        __atomic_load_n(&vgpu_compute_word, __ATOMIC_RELAXED) == VGPU_COMPUTE_FAST, 1);
}

/* What the gate decided for one launch; passed from enter to leave. */
struct vgpu_gate {
    int dev;       /* CUDA ordinal, -1: launch not governed */
    int sample;    /* ring index of the measurement, -1 none */
    uint64_t est;  /* estimated GPU ns charged (what the device's `submitted` counts) */
    uint64_t provisional_ns; /* a launch of unknown cost: what it was charged, settled when its
                              * measurement is read (lim_pacer_settle) */
    uint32_t provisional_pct; /* ... at this limit; 0: nothing to settle */
    uint64_t provisional_raw; /* ... and what it added to charged_ns (the samples as measured) */
    uint32_t unknown;         /* of unknown cost under a queue bound (gate.c, PROVISIONAL_MAX) */
    uint64_t t0;   /* CLOCK_MONOTONIC before the real launch (sampled launches) */
    int claimed;   /* counted in the device's `claiming` until leave() */
};

/* Before the real launch: waits while the device yields, bounds the queue, paces, and may
 * start a measurement.  `key` is lim_cost_key(...) of the launch; `stream` the stream the
 * launch goes to (already resolved: CU_STREAM_PER_THREAD for a _ptsz launch on stream 0). */
void vgpu_compute_enter(struct vgpu_gate *g, uint64_t key, CUstream stream);

/* After the real launch returned rc. */
void vgpu_compute_leave(struct vgpu_gate *g, CUstream stream, CUresult rc);

/* After a synchronising call that began at `from` (CLOCK_MONOTONIC ns) returned rc: where it
 * waited, the work it waited for ended as it returned, which a light container's claim runs on
 * from (hooks_sync.c). */
void vgpu_compute_synced(uint64_t from, CUresult rc);

/* A hook's check before it takes the gate: CUDA_SUCCESS, or what to return where the real driver
 * is not loaded or lacks the entry point `real`. */
static inline CUresult vgpu_compute_ready(void *real)
{
    if (vgpu_cuda_ready() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return real == NULL ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t vgpu_compute_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
