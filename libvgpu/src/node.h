/* node.h: the node-level compute region (include/vgpu_node.h): open/create, claim a slot,
 * heartbeat, and count the other containers active on a GPU.  Everything but vgpu_node_open
 * works on a mapped region and takes the time as an argument (tests pass their own). */
#ifndef VGPU_NODE_FILE_H
#define VGPU_NODE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "limiter.h"
#include "vgpu_node.h"

#define VGPU_NODE_STALE_NS  250000000ull /* heartbeat older than this: dead or stopped */
#define VGPU_NODE_ACTIVE_NS 50000000ull  /* launched within this: active on its GPU */
/* A claiming high (an unpaced high-priority container) makes lows wait while it launched, or
 * had work queued, within this: lows use the GPU's idle time between its bursts.  It covers a
 * high application's own CPU time between a synchronisation and its next launch (tens of us for
 * a loop in C or PyTorch); a pause longer than this lets lows launch, and the high one's next
 * burst then waits for their short queue (LIM_LOW_QUEUE_NS, docs/compute.md "Priority"). */
#define VGPU_NODE_CLAIM_GRACE_NS 1000000ull
/* ... a light container's claim (limiter.h, lim_light): the GPU time its neighbours lose after
 * each of its requests is about this plus its ticker's watch (WATCH_LIGHT_NS), not ~1.5 ms.
 * Simulated GPU, a 30 % service of one 1-ms kernel every 10 ms beside a 70 % loop: the loop got
 * 0.71 with the high one's grace, 0.83 with 0.25 ms, 0.84 with 0.1 ms.  H200, a service of one
 * 1024² matmul every 2 ms beside a 70 % loop of 4096² matmuls, in one call: the loop kept 67.1 %
 * of its alone throughput with 0.25 ms, 71.5-72.0 with 0.1 ms.  Simulated GPU, the H200's
 * `light` shapes (bench_compute_sim.py --only light, three alternated rounds, stop 33): 0.1 ms ->
 * 25 us took the loop beside a service over its share from 63.8-64.8 to 65.2-66.4 % of alone,
 * beside the 13-us service from 80.6-81.6 to 83.9-86.7, beside the ~23 % one from 71.4-72.4 to
 * 73.5-74.7, the services within 1.7 points.  It no longer covers a service's own CPU work
 * between a synchronisation and its next launch beyond 25 us: the loop's short queue
 * (LIM_LOW_QUEUE_NS) may then run first (sim, 4 synchronised 0.2-ms steps a request with 30 /
 * 100 us of CPU between them: the service 97.5 / 96.7 % of alone against 97.9 / 99.1). */
#define VGPU_NODE_LIGHT_GRACE_NS 25000ull

/* Maps the node region at `path`, creating and initialising it if needed.  Returns it, or NULL
 * with a message naming the path in `err`. */
struct vgpu_node_region *vgpu_node_open(const char *path, char *err, size_t errlen);

struct vgpu_node_me {
    uint64_t owner;        /* this process's token, nonzero */
    uint64_t container_id; /* nonzero */
    uint32_t priority;
    uint32_t pid;
};

/* Claims a free or stale slot for (me, uuid); returns its index or -1 when all are taken. */
int vgpu_node_claim(struct vgpu_node_region *r, const struct vgpu_node_me *me,
                    const uint8_t uuid[16], uint64_t now_ns);

/* The owner's tick: heartbeat, activity, flags, priority, turn (VGPU_NODE_TURN).  Returns -1 if
 * the slot was taken over (the owner was stopped for longer than VGPU_NODE_STALE_NS): claim
 * again. */
int vgpu_node_beat(struct vgpu_node_region *r, int slot, const struct vgpu_node_me *me,
                   uint64_t now_ns, uint64_t active_ns, uint32_t flags, uint32_t turn);

/* Marks activity at once (a launch after idleness), so neighbours see it within their tick. */
void vgpu_node_touch(struct vgpu_node_region *r, int slot, uint64_t now_ns);

/* A high one's claim (its slot's activity) cut back to `now_ns`, if it still reads `seen` (a
 * launch that published a new one since keeps it). */
void vgpu_node_cut_claim(struct vgpu_node_region *r, int slot, uint64_t seen, uint64_t now_ns);

/* Frees the slot if `owner` still holds it. */
void vgpu_node_release(struct vgpu_node_region *r, int slot, uint64_t owner);

struct vgpu_node_census {
    uint32_t high;    /* other containers on the GPU, priority 0 and not paced (claiming),
                       * busy within VGPU_NODE_CLAIM_GRACE_NS: lows yield to them */
    uint32_t low;     /* other active containers: priority 1, or priority 0 but held to a
                       * share (paced); a claiming high that is quieter counts for neither */
    uint32_t light;   /* other light containers (VGPU_NODE_FLAG_LIGHT) busy within
                       * VGPU_NODE_LIGHT_GRACE_NS: they claim as highs do; quieter, neither */
    uint32_t present; /* other containers with a live process on the GPU, active or not */
};

/* Counts other containers (by container_id, not by process) on `uuid` at `now_ns`.  Active:
 * active_ns within VGPU_NODE_ACTIVE_NS (active_ns may lie ahead: work still queued). */
void vgpu_node_census(const struct vgpu_node_region *r, const uint8_t uuid[16],
                      uint64_t my_container, uint64_t now_ns, struct vgpu_node_census *out);

/* The slots of other containers' processes on `uuid` that claim: highs not paced, and light
 * ones when `lights` (a light container does not wait for another), active or not; returns how
 * many were stored (at most `max`).  A low's launch path reads their active_ns to wait while one
 * is busy (plus VGPU_NODE_CLAIM_GRACE_NS, or VGPU_NODE_LIGHT_GRACE_NS for a light one). */
uint32_t vgpu_node_claimers(const struct vgpu_node_region *r, const uint8_t uuid[16],
                            uint64_t my_container, uint64_t now_ns, int lights, uint32_t *slots,
                            uint32_t max);

/* When the claims of the claimer slots end: the latest activity (launch, or the end of its
 * estimated queued work) of a claimer among them plus its grace (VGPU_NODE_CLAIM_GRACE_NS, or
 * VGPU_NODE_LIGHT_GRACE_NS for a light one); 0 when none is claiming after `now_ns`.  A low's
 * launch waits until then.  *all_light (when not NULL) says whether every claim still running is a
 * light container's: one its ticker cuts back within WATCH_LIGHT_NS of its work's end. */
uint64_t vgpu_node_claim_end(const struct vgpu_node_region *r, const uint32_t *slots, uint32_t n,
                             uint64_t now_ns, int *all_light);

/* The other containers paced on `uuid` and active at `now_ns` (LIMITED, not LIGHT, and not
 * YIELDING unless `yielding`), as turn members (limiter.h), one per container (its largest share
 * and class); returns how many were stored (at most `max`).  The turns leave out those waiting
 * for a claim; the shares' scaling (lim_share_scaled) counts them: a member yields only while a
 * claimer is busy, and its neighbours' paces would otherwise flip with its yield every tick.
 * With `own_class` not NULL, also the largest period class (lim_turn_class) that the paced
 * processes of `my_container` active there ask for, 0 none: every process of a container takes
 * its window by the same period (each one's class follows its own longest kernels, and the
 * other containers take the largest of them). */
uint32_t vgpu_node_paced(const struct vgpu_node_region *r, const uint8_t uuid[16],
                         uint64_t my_container, uint64_t now_ns, int yielding,
                         struct lim_turn_member *out, uint32_t max, uint32_t *own_class);

/* The other light containers on `uuid` active at `now_ns` (LIMITED and LIGHT: out of the turns,
 * claiming while busy), one per container, as vgpu_node_paced stores them: what one with no
 * gpucores leaves to them (lim_rest_share) counts their shares, or, with none of their own, them
 * among those that split the rest. */
uint32_t vgpu_node_lights(const struct vgpu_node_region *r, const uint8_t uuid[16],
                          uint64_t my_container, uint64_t now_ns, struct lim_turn_member *out,
                          uint32_t max);

#endif
