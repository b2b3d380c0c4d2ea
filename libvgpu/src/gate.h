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

/* The gate for a launch of `key` on `stream` on device `d` at `now`; fills g for
 * vgpu_compute_leave.  May sleep; relaxes the capture mode in m before its own driver calls. */
void vgpu_gate_pass(struct vgpu_gate *g, uint64_t key, CUstream stream, CUdevice d, uint64_t now,
                    struct vgpu_capture_mode *m);

#endif /* VGPU_GATE_H */
