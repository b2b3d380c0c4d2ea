/* vgpu_node.h: the node-level compute region, shared by the shims of every container on a node
 * (docs/compute.md).  It lists which containers are active on which GPU, with their priority, so
 * that a low-priority container yields to an active high-priority one and a container alone on
 * its GPU is not held back.  The agent takes this role over later through the container regions'
 * override fields (vgpu_compute.h); until then the shims use this file directly.
 *
 * Path: GPUWARDEN_NODE_REGION (default /dev/shm/gpuwarden-node; "off" disables it, and sharing
 * is then unknown, which holds low-priority work to its gpucores).  Created by the first shim,
 * mode 0666, sized and initialised under flock(2).
 *
 * One slot per (process, device) pair.  A slot is owned by a random 64-bit token of its process
 * (pids are per-namespace, so they identify nothing across containers); the owner's ticker
 * writes heartbeat_ns every 10 ms, so a slot whose heartbeat is older than 250 ms belongs to a
 * dead or stopped process: it is ignored, and anyone may take it over with a CAS on `owner`.
 * Times are CLOCK_MONOTONIC ns (one clock for the whole node).
 *
 * Paced containers that share a GPU take turns (limiter.h, "turns"): each computes the same
 * windows from the LIMITED slots' `turn`, so the region needs no lock for it.
 *
 * Fixed-width fields, naturally aligned, accessed with __atomic builtins; heartbeat_ns is stored
 * last (release) after the other fields of a newly claimed slot, and loaded first (acquire).
 */
#ifndef VGPU_NODE_H
#define VGPU_NODE_H

#include <stdint.h>

#define VGPU_NODE_MAGIC   UINT64_C(0x31444f4e57504756) /* "VGPWNOD1" read little-endian */
#define VGPU_NODE_VERSION 1u
#define VGPU_NODE_SLOTS   1024u

/* slot.flags (informational, written by the owner) */
#define VGPU_NODE_FLAG_LIMITED  0x1u
#define VGPU_NODE_FLAG_YIELDING 0x2u
#define VGPU_NODE_FLAG_LIGHT    0x4u /* with LIMITED: uses little of its share and is mostly
                                      * idle (limiter.h, lim_light): out of the turns, claims
                                      * like a high */
#define VGPU_NODE_FLAG_CAPPED   0x8u /* with LIMITED: its share (turn) is a cap (`force`), not
                                      * a weight (limiter.h, lim_share_scaled) */
#define VGPU_NODE_FLAG_REST     0x10u /* with LIMITED: a container with no gpucores, its share
                                       * what the others' leave (limiter.h, lim_rest_share) */

/* 64 bytes */
struct vgpu_node_slot {
    uint64_t owner;        /* 0 free; the owning process's token */
    uint64_t container_id; /* vgpu_compute_container.container_id; 0 while being filled */
    uint8_t uuid[16];      /* the GPU, raw cuDeviceGetUuid bytes */
    uint64_t heartbeat_ns; /* owner's ticker, every tick */
    uint64_t active_ns;    /* the owner's last launch (as seen by its ticker or launch path) */
    uint32_t priority;     /* 0 high, 1 low */
    uint32_t pid;          /* informational: the pid in the owner's namespace */
    uint32_t flags;        /* VGPU_NODE_FLAG_* */
    uint32_t turn;         /* with FLAG_LIMITED: VGPU_NODE_TURN(paced share, period class) */
};

/* slot.turn: bits 0-7 the share (percent) the owner is paced to, bits 8-15 the turn period class
 * it asks for (limiter.h, lim_turn_class), bits 16-31 its own longest kernel once known, in
 * units of VGPU_NODE_TURN_LONGEST_UNIT_NS, the nearest (at least 1: 0 is none known yet;
 * saturates at 0xffff, ~4.3 s): what a neighbour whose own kernels are not known yet asks its
 * class for (lim_period_longest).  The nearest, not rounded up: kernels on a class's line ask
 * for the class their owner does (sim, 12.000-ms kernels at 30 %, on the 160-ms line: their
 * owner asked 160, its newcomer, going by the 12.058 ms rounded up, 320).  A function, not a
 * macro: its longest kernel is an atomic load, read once. */
#define VGPU_NODE_TURN_LONGEST_UNIT_NS 65536ull
static inline uint32_t vgpu_node_turn(uint32_t pct, uint32_t cls, uint64_t longest_ns)
{
    uint64_t units = longest_ns >= 0xffffull * VGPU_NODE_TURN_LONGEST_UNIT_NS
                         ? 0xffffu
                         : (longest_ns + VGPU_NODE_TURN_LONGEST_UNIT_NS / 2u) /
                               VGPU_NODE_TURN_LONGEST_UNIT_NS;
    if (units == 0 && longest_ns != 0)
        units = 1;
    return (pct & 0xffu) | (cls & 0xffu) << 8 | (uint32_t)units << 16;
}
#define VGPU_NODE_TURN_PCT(turn)  ((turn) & 0xffu)
#define VGPU_NODE_TURN_CLASS(turn) (((turn) >> 8) & 0xffu)
#define VGPU_NODE_TURN_LONGEST_NS(turn) ((uint64_t)((turn) >> 16) * VGPU_NODE_TURN_LONGEST_UNIT_NS)

/* 64 + 64 * VGPU_NODE_SLOTS bytes */
struct vgpu_node_region {
    uint64_t magic;     /* VGPU_NODE_MAGIC */
    uint32_t version;   /* VGPU_NODE_VERSION */
    uint32_t nslots;    /* VGPU_NODE_SLOTS */
    uint64_t reserved[6];
    struct vgpu_node_slot slots[VGPU_NODE_SLOTS];
};

_Static_assert(sizeof(struct vgpu_node_slot) == 64, "node slot is 64 bytes");
_Static_assert(sizeof(struct vgpu_node_region) == 64 + 64 * VGPU_NODE_SLOTS, "node region size");

#endif /* VGPU_NODE_H */
