/* vgpu_compute.h: the compute part of the shared region (issue 7, docs/compute.md).
 *
 * Fixed-size blocks nested in the region of vgpu_region.h.  Fixed-width types only; everything
 * here is shared between processes (and the agent, through libvgpu/region.py), so fields are
 * read and written with __atomic builtins.  A zero-filled block is valid: zero means "not
 * configured yet" or "no override" everywhere.
 *
 * Who writes what:
 *   container.priority, core_policy, container_id, config_state
 *       the first shim process of the container (from CUDA_TASK_PRIORITY and
 *       GPU_CORE_UTILIZATION_POLICY, config_state 0 -> 1 -> 2) or the agent when it creates the
 *       region (it then stores config_state = 2 last).  Later processes take them from here.
 *   device.limit_pct, device.config_state
 *       configured gpucores of this device: the first shim process that finds config_state 0
 *       (CUDA_DEVICE_SM_LIMIT[_<i>]; it sets config_state 1), or the agent (then sets it 1);
 *       anyone may change it at run time (the agent, the CLI):
 *       every process applies a new value within one tick (10 ms).
 *   device.agent_limit_pct, device.agent_yield
 *       the agent only: overrides that win over the policy/priority table.
 *   device.tat_ns
 *       the shims: the pacer word (CLOCK_MONOTONIC ns), booked with a CAS loop.
 *   device.effective_pct, device.flags, counters, cost_scale_ppm, sat_mhz, proc.*
 *       the shims: what is applied now and what it cost, for the agent and metrics to read.
 */
#ifndef VGPU_COMPUTE_H
#define VGPU_COMPUTE_H

#include <stdint.h>

/* device.agent_limit_pct: 0 no override, 1..100 pace to this share, this value: not limited. */
#define VGPU_COMPUTE_AGENT_UNLIMITED 101u

enum vgpu_compute_agent_yield {
    VGPU_COMPUTE_AGENT_AUTO = 0,  /* follow the node region (priority of active neighbours) */
    VGPU_COMPUTE_AGENT_YIELD = 1, /* launches wait until the agent says otherwise */
    VGPU_COMPUTE_AGENT_RUN = 2,   /* never yield */
};

enum vgpu_compute_policy {
    VGPU_COMPUTE_POLICY_DEFAULT = 0,
    VGPU_COMPUTE_POLICY_FORCE = 1,
    VGPU_COMPUTE_POLICY_DISABLE = 2,
};

/* device.flags, set by the shims' tickers (informational). */
#define VGPU_COMPUTE_FLAG_SHARING      0x1u /* another container is active on this GPU */
#define VGPU_COMPUTE_FLAG_LIMITED      0x2u /* launches are paced (effective_pct) */
#define VGPU_COMPUTE_FLAG_YIELDING     0x4u /* launches wait for a high-priority container */
#define VGPU_COMPUTE_FLAG_NODE_UNKNOWN 0x8u /* the node region is unavailable */
#define VGPU_COMPUTE_FLAG_TURNS        0x10u /* takes turns with other paced containers */
#define VGPU_COMPUTE_FLAG_LIGHT        0x20u /* light: claims the GPU while busy (limiter.h) */

/* Per device of the container: 64 bytes. */
struct vgpu_compute_device {
    uint64_t tat_ns;          /* pacer: theoretical arrival time, CLOCK_MONOTONIC ns */
    uint32_t limit_pct;       /* configured gpucores, 0 = none; changeable at run time */
    uint32_t agent_limit_pct; /* agent override: 0 none, 1..100, VGPU_COMPUTE_AGENT_UNLIMITED */
    uint32_t agent_yield;     /* enum vgpu_compute_agent_yield */
    uint32_t effective_pct;   /* what the shims pace to now, 0 = not paced */
    uint32_t flags;           /* VGPU_COMPUTE_FLAG_* */
    uint32_t config_state;    /* 0 blank, 1 limit_pct written by a shim (from its env) */
    uint64_t charged_ns;      /* estimated GPU ns of paced launches (monotonic counter) */
    uint64_t waited_ns;       /* ns launches waited in the gate (pacer, queue bound, yield) */
    uint64_t launches;        /* launches that went through the gate (monotonic) */
    uint32_t cost_scale_ppm;  /* correction of charged costs (DVFS x busy feedback), ppm, 0 none */
    uint32_t sat_mhz;         /* SM clock the shims saw on the saturated GPU, 0 = none yet */
};

/* Per container (one per region): 64 bytes. */
struct vgpu_compute_container {
    uint32_t priority;     /* CUDA_TASK_PRIORITY: 0 high, 1 low */
    uint32_t core_policy;  /* GPU_CORE_UTILIZATION_POLICY: enum vgpu_compute_policy */
    uint64_t container_id; /* random, nonzero once configured: the identity in the node region */
    uint32_t config_state; /* 0 blank, 1 being configured, 2 configured */
    uint32_t reserved0;
    uint64_t long_until_ns; /* a process of it launched long kernels in turns until about then
                             * (CLOCK_MONOTONIC; ticker.c, the window's split) */
    uint64_t reserved[4];
};

/* Per process slot: 32 bytes. */
struct vgpu_compute_proc {
    uint64_t active_ns; /* CLOCK_MONOTONIC of the process's last launch seen by its ticker, or
                         * of its last tick while a launch of it waits in the gate */
    uint64_t waited_ns; /* ns this process's launches waited */
    uint32_t yielding;  /* 1 while a launch of this process waits for a high-priority container */
    uint32_t split_devs; /* device entries (bit = index) where it takes a part of the
                          * container's window (lim_split_wait), and (bit = 16 + index) where
                          * its own kernels are long */
    uint64_t busy_until_ns; /* there: when its queued work ends by its estimates (its busy
                             * horizon), held a kernel longer (lim_split_busy_until);
                             * UINT64_MAX while it waits for its part */
};

_Static_assert(sizeof(struct vgpu_compute_device) == 64, "compute device block is 64 bytes");
_Static_assert(sizeof(struct vgpu_compute_container) == 64, "compute container block is 64 bytes");
_Static_assert(sizeof(struct vgpu_compute_proc) == 32, "compute proc block is 32 bytes");

#endif /* VGPU_COMPUTE_H */
