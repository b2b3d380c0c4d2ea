/* The audit event: the one struct the kernel hands to user space (ring buffer "events").
 *
 * Fixed-width fields, no implicit padding; mirrored once in Python (bpf/structs.py) and the
 * two are compared by tests/bpf/test_struct_layout.py.  Compilable by BCC and by a host cc.
 */
#ifndef GW_EVENTS_H
#define GW_EVENTS_H

#include <linux/types.h>

/* What happened.  Values are part of the C/Python contract (bpf/structs.py EventKind). */
enum gw_kind {
	GW_KIND_MEM_ALLOC = 1,         /* cuMemAlloc_v2 */
	GW_KIND_MEM_ALLOC_PITCH = 2,   /* cuMemAllocPitch_v2: pitch x height */
	GW_KIND_MEM_ALLOC_MANAGED = 3, /* cuMemAllocManaged */
	GW_KIND_MEM_ALLOC_ASYNC = 4,   /* cuMemAllocAsync */
	GW_KIND_MEM_ALLOC_POOL = 5,    /* cuMemAllocFromPoolAsync */
	GW_KIND_MEM_FREE = 6,          /* cuMemFree_v2 */
	GW_KIND_MEM_FREE_ASYNC = 7,    /* cuMemFreeAsync */
	GW_KIND_VMM_CREATE = 8,        /* cuMemCreate */
	GW_KIND_VMM_RELEASE = 9,       /* cuMemRelease */
	GW_KIND_ARRAY_CREATE = 10,     /* cuArrayCreate_v2 */
	GW_KIND_ARRAY3D_CREATE = 11,   /* cuArray3DCreate_v2 */
	GW_KIND_MIPMAP_CREATE = 12,    /* cuMipmappedArrayCreate */
	GW_KIND_ARRAY_DESTROY = 13,    /* cuArrayDestroy */
	GW_KIND_MIPMAP_DESTROY = 14,   /* cuMipmappedArrayDestroy */
	GW_KIND_CTX_CREATE = 15,       /* cuCtxCreate_v2/_v3/_v4 */
	GW_KIND_CTX_DESTROY = 16,      /* cuCtxDestroy_v2 */
	GW_KIND_PRIMARY_RETAIN = 17,   /* cuDevicePrimaryCtxRetain */
	GW_KIND_PRIMARY_RELEASE = 18,  /* cuDevicePrimaryCtxRelease(_v2) */
	GW_KIND_PROC_CLEAR = 19,       /* process exit or exec: its ledger entries were cleared */
};

/* Device value when the calling thread's current context is not known. */
#define GW_DEVICE_UNKNOWN (-1)

#define GW_EVENT_KILLED 0x1u /* the call crossed the process's limit: SIGKILL was sent */
#define GW_EVENT_FAILED 0x2u /* the driver call returned an error: nothing was accounted */

struct gw_event {
	__u64 ts_ns;     /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 bytes;     /* allocation or free size; for PROC_CLEAR the bytes cleared */
	__u64 ptr;       /* device pointer, VMM handle, CUarray or CUcontext */
	__u64 cgroup_id; /* bpf_get_current_cgroup_id() of the caller */
	__u32 pid;       /* thread group id */
	__u32 tid;
	__s32 device;    /* device ordinal, GW_DEVICE_UNKNOWN if not known */
	__u32 kind;      /* enum gw_kind */
	__u32 flags;     /* GW_EVENT_* */
	__u32 result;    /* CUresult of the call (0 for entry-only events) */
};

#endif /* GW_EVENTS_H */
