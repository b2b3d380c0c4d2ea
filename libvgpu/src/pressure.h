/* The launching thread's CPU wait, sampled by the ticker for GPUWARDEN_GATE_WAIT=auto. */
#ifndef VGPU_PRESSURE_H
#define VGPU_PRESSURE_H

#include <stdint.h>

/* Under `auto`, before a gate wait: this thread is the one whose run delay is followed. */
void vgpu_pressure_note_waiter(void);

/* Once a PRESSURE_EVERY_NS under `auto`: samples the waiting thread's run delay and the
 * container's CPU throttling and sets how the gate waits (vgpu_cs.gate_wait,
 * lim_wait_choose). */
void vgpu_pressure_tick(uint64_t now);

#endif
