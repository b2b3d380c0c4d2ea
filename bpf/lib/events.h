/* The audit event: the one struct the kernel hands to user space (ring buffer "events").
 *
 * Fixed-width fields, no implicit padding; mirrored once in Python (bpf/structs.py) and the
 * two are compared by tests/bpf/test_struct_layout_matches_c.py.  Compilable by BCC and by a host cc.
 */
#ifndef GW_EVENTS_H
#define GW_EVENTS_H

#include <linux/types.h>

/* What happened: GW_KIND_<name> for each VGPU_EVENT_KIND row of the CUDA entry-point table
 * (libvgpu/include/hooks.def, on the include path), which bpf/structs.py reads too. */
enum gw_kind {
#define VGPU_EVENT_KIND(name, value) GW_KIND_##name = value,
#include "hooks.def"
#undef VGPU_EVENT_KIND
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
