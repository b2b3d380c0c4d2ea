/* ticker.h: the per-process ticker (docs/compute.md).  Every 10 ms it beats the process's slots
 * in the node region, takes the census of the neighbours on each device, decides (limiter.h)
 * whether the device is paced or yields, and publishes the verdict and the turn word for the
 * gate and the fast-path word for the hooks.  Between ticks, a high-priority process with late
 * work beside others re-checks it every 1 ms and keeps its claim ahead (a light one every
 * 0.1 ms, from the moment its claim begins). */
#ifndef VGPU_TICKER_H
#define VGPU_TICKER_H

#include <stdint.h>

#include "limiter.h"

/* One tick at `now` (also run once by the initialisation, before the ticker starts). */
void vgpu_tick(uint64_t now);

/* Starts the ticker thread: 0, or -1 when it could not be started. */
int vgpu_ticker_start(void);

/* A light claim began (gate.c): the ticker, asleep until its next tick, wakes now to watch it
 * (one futex wake at most per sleep of the ticker; nothing while it is awake). */
void vgpu_ticker_nudge(void);

/* The turn word (vgpu_cdev.turn) the ticker publishes for the gate: period, offset and length
 * in 10-us units (the longest period, 640 ms, is 64,000 of them); 0 none. */
#define VGPU_TURN_UNIT_NS 10000u

static inline uint64_t vgpu_turn_pack(struct lim_turn t)
{
    if (t.len_ns == 0)
        return 0;
    return (uint64_t)(t.period_ns / VGPU_TURN_UNIT_NS) << 32 |
           (uint64_t)(t.off_ns / VGPU_TURN_UNIT_NS) << 16 | (t.len_ns / VGPU_TURN_UNIT_NS);
}

static inline struct lim_turn vgpu_turn_unpack(uint64_t w)
{
    struct lim_turn t = {(uint32_t)(w >> 16 & 0xffffu) * VGPU_TURN_UNIT_NS,
                         (uint32_t)(w & 0xffffu) * VGPU_TURN_UNIT_NS,
                         (uint32_t)(w >> 32 & 0xffffu) * VGPU_TURN_UNIT_NS};
    return t;
}

#endif /* VGPU_TICKER_H */
