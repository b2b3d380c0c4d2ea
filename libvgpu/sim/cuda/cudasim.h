/*
 * cudasim.h - internals shared by the simulated libcuda's files: the process-local objects
 * (contexts, streams, events, pools, allocations, ...) behind the opaque CUDA handles.
 *
 * Handles are pointers to objects that carry a magic number and are never freed (a destroyed
 * object keeps its memory with alive = 0), so a stale handle is reported, not dereferenced
 * into freed memory.  One process-wide mutex (g_sim.lock) guards the local tables; the shared,
 * cross-process state lives in common/simstate.h.
 */
#ifndef GWSIM_CUDASIM_H
#define GWSIM_CUDASIM_H

#include <pthread.h>
#include <stdint.h>

#include "../../include/cuda_api.h"
#include "common/simstate.h"

#define GWSIM_EXPORT __attribute__((visibility("default")))

#define GWSIM_ALIGN 512ULL                 /* allocation and pitch alignment */
#define GWSIM_GRANULARITY (2ULL << 20)     /* VMM and pool reservation granularity */
#define GWSIM_QUEUE_DEPTH 1024u            /* kernels a stream may have queued */
#define GWSIM_MAX_CTX 64u
#define GWSIM_MAX_POOLS 64u

enum gwsim_magic {
    GWSIM_M_CTX = 0x43545831,
    GWSIM_M_STREAM = 0x5354524d,
    GWSIM_M_EVENT = 0x45564e54,
    GWSIM_M_POOL = 0x504f4f4c,
    GWSIM_M_PHYS = 0x50485953,
    GWSIM_M_ARRAY = 0x41525259,
    GWSIM_M_MODULE = 0x4d4f444c,
    GWSIM_M_FUNC = 0x46554e43,
    GWSIM_M_GRAPH = 0x47525048,
    GWSIM_M_GEXEC = 0x47455843,
};

struct CUstream_st {
    uint32_t magic;
    int alive;
    struct CUctx_st *ctx;
    unsigned flags;
    int priority;
    struct gwsim_ticket last;                     /* its newest kernel (they end in order) */
    uint64_t queued;                              /* kernels ever queued on it */
    struct gwsim_ticket ends[GWSIM_QUEUE_DEPTH];  /* its last queued kernels */
};

struct CUctx_st {
    uint32_t magic;
    int alive;
    int device;
    int primary;
    unsigned flags;
    unsigned refcount;   /* primary contexts: retains */
    struct gwsim_ticket last; /* the newest kernel queued in it */
    struct CUstream_st null_stream;
};

struct CUevent_st {
    uint32_t magic;
    int alive;
    unsigned flags;
    int recorded;
    int device;               /* of the stream it was recorded on */
    uint64_t recorded_ns;     /* when it was recorded */
    struct gwsim_ticket tail; /* the stream's newest kernel then: the event completes with it */
};

struct CUmemPoolHandle_st {
    uint32_t magic;
    int alive;
    int device;
    int is_default;
    uint64_t reserved, reserved_high, used, used_high, threshold;
    int reuse[3];
};

struct gwsim_phys { /* a cuMemCreate handle */
    uint32_t magic;
    int device;
    uint64_t size;
    unsigned mapped;
    int released;
};

struct CUarray_st {
    uint32_t magic;
    int alive;
    int device;
    struct CUctx_st *ctx;
    uint64_t bytes;
};

struct CUfunc_st {
    uint32_t magic;
    int loaded; /* launched once (GPUWARDEN_SIM_LAZY_LOAD_US is paid on the first launch) */
    char name[128];
};

struct CUmod_st {
    uint32_t magic;
    int alive;
};

struct gwsim_node {
    unsigned grid[3];
};

struct CUgraph_st {
    uint32_t magic;
    int alive;
    unsigned n, cap;
    struct gwsim_node *nodes;
};

struct CUgraphExec_st {
    uint32_t magic;
    int alive;
    unsigned n;
    struct gwsim_node *nodes;
};

struct CUgraphNode_st {
    unsigned index;
};

/* Process-local simulator state. */
enum { GWSIM_CALL_LAUNCH, GWSIM_CALL_RECORD, GWSIM_CALL_QUERY };

/* Spins the CPU cost GPUWARDEN_SIM_CALL_NS gives the call `which` (none by default). */
void gwsim_call_cost(int which);
/* Waits for the GPU until `mono_ns` in a synchronisation: asleep, or spinning where
 * GPUWARDEN_SIM_SYNC=spin. */
void gwsim_sync_wait(uint64_t mono_ns);
/* A synchronisation: wait (as GPUWARDEN_SIM_SYNC says) until the ticket's kernel has ended. */
void gwsim_sync_ticket(int device, struct gwsim_ticket *t);

struct gwsim_cuda {
    pthread_mutex_t lock;
    int initialized;
    double kernel_scale;
    double jitter;        /* GPUWARDEN_SIM_JITTER / 100: a kernel lasts up to this much longer */
    uint64_t jitter_rng;  /* its draws (xorshift64*, under the lock) */
    unsigned stall_every; /* GPUWARDEN_SIM_LAUNCH_STALL: every Nth launch returns late */
    unsigned stall_us;
    unsigned lazy_load_us; /* GPUWARDEN_SIM_LAZY_LOAD_US: a function's first launch loads it */
    unsigned lazy_loads;   /* functions loaded so far */
    uint64_t call_ns[3]; /* GPUWARDEN_SIM_CALL_NS: CPU cost of a launch, a record, a query */
    int sync_spin;       /* GPUWARDEN_SIM_SYNC=spin: synchronisations spin */
    unsigned launches;
    uint64_t next_va;
    struct CUctx_st ctx[GWSIM_MAX_CTX]; /* [0, MAX_DEVICES): primary contexts */
    unsigned dev_ctx_count[GWSIM_MAX_DEVICES];
    struct CUmemPoolHandle_st pools[GWSIM_MAX_POOLS]; /* [0, MAX_DEVICES): default pools */
    struct CUmemPoolHandle_st *current_pool[GWSIM_MAX_DEVICES];
};

extern struct gwsim_cuda g_sim;

/* entry.c */
CUresult gwsim_check_init(void);
int gwsim_device_count(void);
/* Validates a CUdevice (an ordinal among the visible devices, CUDA_VISIBLE_DEVICES) and turns it
 * into the physical device index the state uses. */
CUresult gwsim_resolve_device(CUdevice *dev);
CUdevice gwsim_ordinal_of(int phys); /* the reverse, for what the API hands back */

/* ctx.c */
struct CUctx_st *gwsim_current_ctx(void);
CUresult gwsim_require_ctx(struct CUctx_st **out);
int gwsim_ctx_ok(const struct CUctx_st *ctx);
void gwsim_ctx_activate(struct CUctx_st *ctx);   /* lock held */
void gwsim_ctx_deactivate(struct CUctx_st *ctx); /* lock held */

/* mem.c */
uint64_t gwsim_new_va(uint64_t size, uint64_t align); /* lock held */
void gwsim_free_ctx_memory(struct CUctx_st *ctx);     /* lock held */
void gwsim_trim_pools(int device);                    /* lock held; at sync points */


static inline uint64_t gwsim_round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

#endif /* GWSIM_CUDASIM_H */
