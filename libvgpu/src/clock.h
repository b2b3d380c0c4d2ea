/* clock.h: the clock model of the compute limiter (docs/compute.md, limiter.h): one thread per
 * process samples NVML every 100 ms (SM clock, utilisation, power) and publishes, per device,
 * the correction of charged costs the pacer books with: DVFS correction x busy feedback. */
#ifndef VGPU_CLOCK_H
#define VGPU_CLOCK_H

/* Starts the clock thread, once (the ticker calls it as soon as some device of the process may
 * be paced): NVML's initialisation can take a while and must not stop the heartbeats. */
void vgpu_clock_start(void);

#endif /* VGPU_CLOCK_H */
