/* Maps of the audit program: keys, values and declarations (BCC only).
 *
 * Sizes can be overridden with -D from the loader (bpf/audit.py); the defaults are generous
 * for one node: 64k live processes' worth of ledger rows and 1M live allocations.
 */
#ifndef GW_MAPS_H
#define GW_MAPS_H

#include <linux/types.h>
#include "lib/errors.h"
#include "lib/events.h"

#ifndef GW_MAX_PROCS
#define GW_MAX_PROCS 16384
#endif
#ifndef GW_MAX_DEVICES
#define GW_MAX_DEVICES 16 /* ordinals 0..15 are cleared at exit, plus GW_DEVICE_UNKNOWN */
#endif
#ifndef GW_MAX_LEDGER
#define GW_MAX_LEDGER 65536
#endif
#ifndef GW_MAX_PTRS
#define GW_MAX_PTRS 1048576
#endif
#ifndef GW_MAX_CTX
#define GW_MAX_CTX 65536
#endif
#ifndef GW_MAX_THREADS
#define GW_MAX_THREADS 65536
#endif
#ifndef GW_MAX_CGROUPS
#define GW_MAX_CGROUPS 4096
#endif
#ifndef GW_RINGBUF_PAGES
#define GW_RINGBUF_PAGES 256 /* 1 MiB */
#endif
#define GW_CTX_STACK 8 /* power of two */

/* One live process that the probes have seen.  gen tells two processes that reused one pid
 * apart: every key below that names a process carries (pid, gen). */
struct gw_proc {
	__u64 gen;   /* bpf_ktime_get_ns() when first seen */
	__u64 total; /* live bytes on all devices */
};

struct gw_ledger_key {
	__u32 pid;
	__s32 device;
};

/* Pointer namespaces: a device pointer, a VMM handle and a CUarray may share a value. */
enum gw_ns {
	GW_NS_DEVPTR = 0,
	GW_NS_VMM = 1,
	GW_NS_ARRAY = 2,
	GW_NS_MIPMAP = 3,
};

struct gw_ptr_key {
	__u64 ptr;
	__u64 gen;
	__u32 pid;
	__u32 ns;
};

struct gw_ptr_val {
	__u64 bytes;
	__s32 device;
	__u32 kind;
};

struct gw_ctx_key {
	__u64 ctx;
	__u64 gen;
	__u32 pid;
	__u32 pad_;
};

/* The calling thread's context stack (cuCtxSetCurrent / Push / Pop). */
struct gw_ctx_stack {
	__u64 ctx[GW_CTX_STACK];
	__u32 depth;
	__u32 pad_;
};

/* Arguments saved at a call's entry for its return probe, per (thread, slot). */
enum gw_slot {
	GW_SLOT_ALLOC = 0,
	GW_SLOT_CTX = 1,
};

struct gw_pending_key {
	__u32 tid;
	__u32 slot;
};

struct gw_pending {
	__u64 out;    /* user address of the out-parameter (pointer, handle, context) */
	__u64 bytes;  /* size known at entry */
	__u64 aux;    /* pitch: user address of *pPitch */
	__u64 height; /* pitch: height */
	__s32 device;
	__u32 kind;
	__u32 depth;  /* nested probed calls of the same slot on this thread */
	__u32 pad_;
};

BPF_HASH(procs, __u32, struct gw_proc, GW_MAX_PROCS);
BPF_HASH(ledger, struct gw_ledger_key, __u64, GW_MAX_LEDGER);
/* The big maps grow on demand (BPF_F_NO_PREALLOC: kernel >= 6.1 allocates tracing maps'
 * elements safely), so their memory follows use, not the generous maximum. */
BPF_F_TABLE("hash", struct gw_ptr_key, struct gw_ptr_val, ptrs, GW_MAX_PTRS, BPF_F_NO_PREALLOC);
BPF_F_TABLE("hash", struct gw_ctx_key, __s32, ctx_dev, GW_MAX_CTX, BPF_F_NO_PREALLOC);
BPF_F_TABLE("hash", __u32, struct gw_ctx_stack, ctx_stack, GW_MAX_THREADS, BPF_F_NO_PREALLOC);
BPF_HASH(pending, struct gw_pending_key, struct gw_pending, GW_MAX_THREADS);
BPF_HASH(launches, __u32, __u64, GW_MAX_PROCS);
BPF_HASH(kill_limits, __u32, __u64, GW_MAX_PROCS); /* pid -> max live bytes; filled by the agent */
BPF_HASH(cgroups, __u64, __u8, GW_MAX_CGROUPS);    /* traced cgroup ids (GW_CGROUP_FILTER) */
BPF_ARRAY(errors, __u64, GW_ERR__COUNT);
BPF_RINGBUF_OUTPUT(events, GW_RINGBUF_PAGES);

#endif /* GW_MAPS_H */
