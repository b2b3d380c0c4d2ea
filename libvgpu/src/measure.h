/* measure.h: the GPU-time measurements of the launch gate (docs/compute.md): one launch in
 * many is bracketed by two events; the finished ones feed the cost table (limiter.h) and tell
 * the queue bound how much work is still outstanding.  Per device, a ring of measurements in
 * flight under the device's spin lock, and a pool of spare events.
 *
 * The gate's own driver calls run in the relaxed stream-capture mode (vgpu_capture_relax before
 * the first, vgpu_capture_restore when the gate is done): another thread may be capturing a
 * graph in the global mode, which forbids this thread's cuEventQuery. */
#ifndef VGPU_MEASURE_H
#define VGPU_MEASURE_H

#include <stdint.h>

#include "compute.h"
#include "compute_state.h"
#include "cuda_api.h"

/* The capture mode of the calling thread, swapped to relaxed before the gate's first own driver
 * call and restored when the gate is done; the gate's calls never touch a capturing stream.
 * Most launches make no driver call of the gate's own and pay nothing for this. */
struct vgpu_capture_mode {
    CUstreamCaptureMode mode;
    int relaxed;
};

void vgpu_capture_relax(struct vgpu_capture_mode *m);
void vgpu_capture_restore(struct vgpu_capture_mode *m);

/* Takes finished measurements off the ring (oldest first), under c->lock. */
void vgpu_measure_poll_locked(struct vgpu_cdev *c);

/* Polls the measurements (relaxing the capture mode, taking the lock). */
void vgpu_measure_poll(struct vgpu_cdev *c, struct vgpu_capture_mode *m);

/* Polls the measurements when the oldest one is due (its estimated end has passed) or `force`:
 * one cuEventQuery per due measurement instead of one per launch. */
static inline void vgpu_measure_poll_due(struct vgpu_cdev *c, uint64_t now, int force,
                                         struct vgpu_capture_mode *m)
{
    if (LD(&c->count) == 0 || (!force && now < LD(&c->poll_due)))
        return;
    vgpu_measure_poll(c, m);
}

/* Starts measuring the launch of `key` the gate is letting onto `stream`: records its start
 * event, reserves its slot (g->sample) and notes the CPU time before the real launch (g->t0).
 * Leaves g->sample at -1 when there is no current context, no event or the ring is full of
 * unfinished launches. */
void vgpu_measure_start(struct vgpu_cdev *c, struct vgpu_gate *g, uint64_t key, CUstream stream,
                        struct vgpu_capture_mode *m);

/* After the real launch returned rc: records the end event of g's measurement and publishes
 * `mark` (the device's `submitted` after the launch), which makes it pollable. */
void vgpu_measure_end(struct vgpu_cdev *c, const struct vgpu_gate *g, CUstream stream,
                      CUresult rc, uint64_t mark);

#endif /* VGPU_MEASURE_H */
