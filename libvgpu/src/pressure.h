/* The container's CPU pressure (Linux PSI), read by the ticker for GPUWARDEN_GATE_WAIT=auto. */
#ifndef VGPU_PRESSURE_H
#define VGPU_PRESSURE_H

#include <stdint.h>

/* Once a PRESSURE_EVERY_NS: under `auto`, reads the CPU pressure file and sets how the gate
 * waits (vgpu_cs.gate_wait, lim_wait_choose).  An unreadable file leaves the waits asleep. */
void vgpu_pressure_tick(uint64_t now);

#endif
