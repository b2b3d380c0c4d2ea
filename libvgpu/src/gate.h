/* gate.h: the launch gate proper (docs/compute.md), for a launch compute.c found governed: waits
 * while the device yields, bounds the queue of estimated work, books the launch on the pacer
 * (taking turns with other paced containers), publishes the busy horizon, and may start a
 * measurement (measure.h). */
#ifndef VGPU_GATE_H
#define VGPU_GATE_H

#include <stdint.h>

#include "compute.h"
#include "cuda_api.h"
#include "measure.h"

struct vgpu_cdev;

/* The gate for a launch of `key` on `stream` on device `d` at `now`; fills g for
 * vgpu_compute_leave.  May sleep; relaxes the capture mode in m before its own driver calls. */
void vgpu_gate_pass(struct vgpu_gate *g, uint64_t key, CUstream stream, CUdevice d, uint64_t now,
                    struct vgpu_capture_mode *m);

/* A light one's claim on device c runs on LIM_LIGHT_CLAIM_JOIN_NS from `now`, though it ended by
 * its estimate: its work ran late until now or runs late still.  Its witnesses: the ticker's
 * watch of the measured work (from the claim's first launch on: vgpu_ticker_nudge), and a
 * synchronise that waited (vgpu_compute_synced).  A launch that begins a new claim meanwhile
 * keeps its own end.  Only a claim begun in the current light spell runs on: the ticker clears
 * the claim when the container turns light, and work launched before (a model's loading, its
 * measurement read only once the watch began) keeps none going.  Until stop 54 it did, with
 * the claim's start unset: on the H100 a newcomer whose loading's measurement the watch read as
 * it turned light "claimed 283685 ms without a break" (the clock's whole uptime), was held back
 * at once and light again twice, and read 21.0 % in its first second where 28.1 was due. */
void vgpu_claim_runs_on(struct vgpu_cdev *c, uint64_t now);

#endif /* VGPU_GATE_H */
