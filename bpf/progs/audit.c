/* gpuwarden audit: uprobes on libcuda's allocation, free, context and launch entry points and
 * the process exit/exec tracepoints, over the in-kernel ledger (maps in lib/maps.h).
 * Loaded by bpf/audit.py, which attaches each function to the symbols listed in bpf/probes.py.
 */
#include <uapi/linux/ptrace.h>
#include <linux/sched.h>
#include "include/gw_cuda_abi.h"
#include "lib/maps.h"

#define ARG(n) ((__u64)PT_REGS_PARM##n(ctx))

/* ---- the ledger ----
 *
 * BCC rewrites map calls (procs.lookup(...)) only in the file it is given, not in included
 * headers, so the helpers that touch maps live here; lib/ holds the maps and structs.
 *
 *
 * Invariant: ledger[(pid, dev)] == sum of ptrs[(*, gen, pid, *)].bytes on dev, and
 * procs[pid].total == sum over devices, maintained by the probes alone; the exit tracepoint
 * removes a process's rows.  User space only reads, fills kill_limits and cgroups, and
 * garbage-collects ptrs/ctx_dev rows of processes that are gone (their gen no longer in procs).
 */

static __always_inline void gw_error(__u32 code)
{
	__u64 *n = errors.lookup(&code);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* Whether the caller is traced: always, unless built with the cgroup filter. */
static __always_inline int gw_traced(void)
{
#ifdef GW_CGROUP_FILTER
	__u64 cg = bpf_get_current_cgroup_id();
	return cgroups.lookup(&cg) != NULL;
#else
	return 1;
#endif
}

static __always_inline void gw_emit(__u32 kind, __s32 device, __u64 bytes, __u64 ptr,
				    __u32 flags, __u32 result)
{
	struct gw_event *ev = events.ringbuf_reserve(sizeof(struct gw_event));
	if (!ev) {
		gw_error(GW_ERR_LOST_EVENT);
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	ev->ts_ns = bpf_ktime_get_ns();
	ev->bytes = bytes;
	ev->ptr = ptr;
	ev->cgroup_id = bpf_get_current_cgroup_id();
	ev->pid = (__u32)(id >> 32);
	ev->tid = (__u32)id;
	ev->device = device;
	ev->kind = kind;
	ev->flags = flags;
	ev->result = result;
	events.ringbuf_submit(ev, 0);
}

/* The caller's process row, created on first use. */
static __always_inline struct gw_proc *gw_proc_get(__u32 pid)
{
	struct gw_proc *p = procs.lookup(&pid);
	if (p)
		return p;
	struct gw_proc fresh = {.gen = bpf_ktime_get_ns(), .total = 0};
	if (procs.insert(&pid, &fresh) != 0 && procs.lookup(&pid) == NULL) {
		gw_error(GW_ERR_PROCS_FULL);
		return NULL;
	}
	return procs.lookup(&pid);
}

/* The device of the calling thread's current context, or GW_DEVICE_UNKNOWN. */
static __always_inline __s32 gw_current_device(__u32 pid, __u32 tid, __u64 gen)
{
	struct gw_ctx_stack *s = ctx_stack.lookup(&tid);
	if (!s || s->depth == 0 || s->depth > GW_CTX_STACK)
		return GW_DEVICE_UNKNOWN;
	__u32 top = (s->depth - 1) & (GW_CTX_STACK - 1);
	struct gw_ctx_key k = {};
	k.ctx = s->ctx[top];
	k.gen = gen;
	k.pid = pid;
	__s32 *dev = ctx_dev.lookup(&k);
	return dev ? *dev : GW_DEVICE_UNKNOWN;
}

static __always_inline void gw_ledger_add(__u32 pid, __s32 device, __u64 delta)
{
	struct gw_ledger_key k = {.pid = pid, .device = device};
	__u64 *v = ledger.lookup(&k);
	if (!v) {
		__u64 zero = 0;
		ledger.insert(&k, &zero);
		v = ledger.lookup(&k);
		if (!v) {
			gw_error(GW_ERR_LEDGER_FULL);
			return;
		}
	}
	__sync_fetch_and_add(v, delta);
}

/* Account a successful allocation of `bytes` at `ptr` (in namespace ns). */
static __always_inline void gw_account_alloc(__u32 pid, struct gw_proc *p, __u32 ns, __u64 ptr,
					     __u64 bytes, __s32 device, __u32 kind)
{
	struct gw_ptr_key k = {};
	k.ptr = ptr;
	k.gen = p->gen;
	k.pid = pid;
	k.ns = ns;
	struct gw_ptr_val *old = ptrs.lookup(&k);
	if (old) {
		/* The driver handed this value out again: the free went unseen (made before the
		 * probes were attached, or by an entry point not probed).  Replace the old row. */
		struct gw_ptr_val prev = *old;
		if (ptrs.delete(&k) == 0) {
			gw_ledger_add(pid, prev.device, -prev.bytes);
			__sync_fetch_and_add(&p->total, -prev.bytes);
		}
		gw_error(GW_ERR_REPLACED_PTR);
	}
	struct gw_ptr_val v = {.bytes = bytes, .device = device, .kind = kind};
	if (ptrs.insert(&k, &v) != 0) {
		gw_error(GW_ERR_PTRS_FULL);
		return;
	}
	gw_ledger_add(pid, device, bytes);
	__sync_fetch_and_add(&p->total, bytes);
}

/* Account a free of `ptr` (in namespace ns): returns the bytes released (0 if unknown). */
static __always_inline void gw_account_free(__u32 ns, __u64 ptr, __u32 kind)
{
	if (!gw_traced())
		return;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct gw_proc *p = procs.lookup(&pid);
	if (!p)
		return;
	struct gw_ptr_key k = {};
	k.ptr = ptr;
	k.gen = p->gen;
	k.pid = pid;
	k.ns = ns;
	struct gw_ptr_val *v = ptrs.lookup(&k);
	if (!v)
		return;
	struct gw_ptr_val got = *v;
	if (ptrs.delete(&k) != 0)
		return; /* another thread freed it first */
	gw_ledger_add(pid, got.device, -got.bytes);
	__sync_fetch_and_add(&p->total, -got.bytes);
	gw_emit(kind, got.device, got.bytes, ptr, 0, 0);
}

/* In-kernel enforcement: if the process has a limit and `bytes` more would cross it, SIGKILL
 * it now, from the entry probe, so the call never returns.  Returns 1 if killed. */
static __always_inline int gw_enforce(__u32 pid, struct gw_proc *p, __u64 bytes, __s32 device,
				      __u32 kind)
{
	__u64 *limit = kill_limits.lookup(&pid);
	if (!limit || p->total + bytes <= *limit)
		return 0;
	if (bpf_send_signal(9) != 0) {
		gw_error(GW_ERR_KILL_FAILED);
		return 0;
	}
	gw_emit(kind, device, bytes, 0, GW_EVENT_KILLED, 0);
	return 1;
}

/* Entry of an allocation: enforce, then save what the return probe needs. */
static __always_inline void gw_alloc_enter(__u32 kind, __u64 out, __u64 bytes, __u64 aux,
					   __u64 height, __s32 device_hint, int device_known)
{
	if (!gw_traced())
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct gw_pending_key pk = {.tid = tid, .slot = GW_SLOT_ALLOC};
	struct gw_pending *nested = pending.lookup(&pk);
	if (nested) {
		nested->depth += 1; /* an allocation entry point called from another one */
		return;
	}
	struct gw_proc *p = gw_proc_get(pid);
	if (!p)
		return;
	__s32 device = device_known ? device_hint : gw_current_device(pid, tid, p->gen);
	if (gw_enforce(pid, p, bytes, device, kind))
		return;
	struct gw_pending v = {};
	v.out = out;
	v.bytes = bytes;
	v.aux = aux;
	v.height = height;
	v.device = device;
	v.kind = kind;
	if (pending.insert(&pk, &v) != 0)
		gw_error(GW_ERR_PENDING_FULL);
}

/* Take this thread's pending entry of `slot` at the return of its outermost call; 0 while a
 * nested call of the same family returns (its depth is unwound instead) or when none is kept. */
static __always_inline int gw_pending_take(__u32 tid, __u32 slot, struct gw_pending *out)
{
	struct gw_pending_key pk = {.tid = tid, .slot = slot};
	struct gw_pending *pv = pending.lookup(&pk);
	if (!pv)
		return 0;
	if (pv->depth > 0) {
		pv->depth -= 1;
		return 0;
	}
	*out = *pv;
	pending.delete(&pk);
	return 1;
}

/* At the return of the outermost probed call of `slot` on thread `tid`: its pending entry in
 * `a` and the value its out-parameter received in `out`; 1 on success, 0 when there is nothing
 * to account (nested call, no entry, a failed call, which is emitted, or an unreadable out). */
static __always_inline int gw_returned(struct pt_regs *ctx, __u32 tid, __u32 slot,
				       struct gw_pending *a, __u64 *out)
{
	if (!gw_pending_take(tid, slot, a))
		return 0;
	__u32 result = (__u32)PT_REGS_RC(ctx);
	if (result != 0) {
		gw_emit(a->kind, a->device, a->bytes, 0, GW_EVENT_FAILED, result);
		return 0;
	}
	if (bpf_probe_read_user(out, sizeof(*out), (void *)a->out) != 0) {
		gw_error(GW_ERR_READ_USER);
		return 0;
	}
	return 1;
}

/* Return of an allocation: on success read the out-parameter and account. */
static __always_inline void gw_alloc_return(struct pt_regs *ctx, __u32 ns)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct gw_pending a;
	__u64 ptr = 0;
	if (!gw_returned(ctx, tid, GW_SLOT_ALLOC, &a, &ptr))
		return;
	__u64 bytes = a.bytes;
	if (a.aux) {
		__u64 pitch = 0;
		if (bpf_probe_read_user(&pitch, sizeof(pitch), (void *)a.aux) != 0) {
			gw_error(GW_ERR_READ_USER);
			return;
		}
		bytes = pitch * a.height;
	}
	struct gw_proc *p = procs.lookup(&pid);
	if (!p)
		return;
	gw_account_alloc(pid, p, ns, ptr, bytes, a.device, a.kind);
	gw_emit(a.kind, a.device, bytes, ptr, 0, 0);
}

/* Context stack of the calling thread. */
static __always_inline struct gw_ctx_stack *gw_stack_get(__u32 tid)
{
	struct gw_ctx_stack *s = ctx_stack.lookup(&tid);
	if (s)
		return s;
	struct gw_ctx_stack fresh = {};
	if (ctx_stack.insert(&tid, &fresh) != 0 && ctx_stack.lookup(&tid) == NULL) {
		gw_error(GW_ERR_THREADS_FULL);
		return NULL;
	}
	return ctx_stack.lookup(&tid);
}

static __always_inline void gw_stack_push(__u32 tid, __u64 ctxh)
{
	struct gw_ctx_stack *s = gw_stack_get(tid);
	if (!s)
		return;
	__u32 d = s->depth;
	if (d >= GW_CTX_STACK) {
		gw_error(GW_ERR_CTX_STACK);
		return;
	}
	s->ctx[d & (GW_CTX_STACK - 1)] = ctxh;
	s->depth = d + 1;
}

static __always_inline void gw_stack_pop(__u32 tid)
{
	struct gw_ctx_stack *s = ctx_stack.lookup(&tid);
	if (!s || s->depth == 0 || s->depth > GW_CTX_STACK) {
		gw_error(GW_ERR_CTX_STACK);
		return;
	}
	s->depth -= 1;
}

static __always_inline void gw_stack_set(__u32 tid, __u64 ctxh)
{
	if (ctxh == 0) {
		struct gw_ctx_stack *e = ctx_stack.lookup(&tid);
		if (e && e->depth > 0 && e->depth <= GW_CTX_STACK)
			e->depth -= 1;
		return;
	}
	struct gw_ctx_stack *s = gw_stack_get(tid);
	if (!s)
		return;
	if (s->depth == 0 || s->depth > GW_CTX_STACK) {
		s->ctx[0] = ctxh;
		s->depth = 1;
		return;
	}
	s->ctx[(s->depth - 1) & (GW_CTX_STACK - 1)] = ctxh;
}

/* Entry of a context create / primary retain: remember where the handle goes and its device. */
static __always_inline void gw_ctx_enter(__u32 kind, __u64 out, __s32 device)
{
	if (!gw_traced())
		return;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct gw_pending_key pk = {.tid = tid, .slot = GW_SLOT_CTX};
	struct gw_pending *nested = pending.lookup(&pk);
	if (nested) {
		nested->depth += 1;
		return;
	}
	struct gw_pending v = {};
	v.out = out;
	v.device = device;
	v.kind = kind;
	if (pending.insert(&pk, &v) != 0)
		gw_error(GW_ERR_PENDING_FULL);
}

/* Return of a context create (push = 1) or primary retain (push = 0). */
static __always_inline void gw_ctx_return(struct pt_regs *ctx, int push)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct gw_pending a;
	__u64 ctxh = 0; /* a context entry's bytes are 0: its failure is emitted with 0 */
	if (!gw_returned(ctx, tid, GW_SLOT_CTX, &a, &ctxh))
		return;
	struct gw_proc *p = gw_proc_get(pid);
	if (!p)
		return;
	struct gw_ctx_key k = {};
	k.ctx = ctxh;
	k.gen = p->gen;
	k.pid = pid;
	__s32 dev = a.device;
	if (ctx_dev.update(&k, &dev) != 0)
		gw_error(GW_ERR_CTX_FULL);
	if (push)
		gw_stack_push(tid, ctxh);
	gw_emit(a.kind, a.device, 0, ctxh, 0, 0);
}

/* Remove every row of process pid (exit or exec); the process's gen dies with it. */
static __always_inline void gw_clear_process(__u32 pid)
{
	struct gw_proc *p = procs.lookup(&pid);
	if (!p)
		return;
	__u64 total = p->total;
	struct gw_ledger_key k = {.pid = pid, .device = GW_DEVICE_UNKNOWN};
	ledger.delete(&k);
	for (int d = 0; d < GW_MAX_DEVICES; d++) { /* a bounded loop (kernel >= 5.3) */
		k.device = d;
		ledger.delete(&k);
	}
	procs.delete(&pid);
	gw_emit(GW_KIND_PROC_CLEAR, GW_DEVICE_UNKNOWN, total, 0, 0, 0);
}


/* ---- allocations: entry saves arguments, return reads the out-parameter ---- */

int gw_mem_alloc_enter(struct pt_regs *ctx) /* (CUdeviceptr *dptr, size_t bytes) */
{
	gw_alloc_enter(GW_KIND_MEM_ALLOC, ARG(1), ARG(2), 0, 0, 0, 0);
	return 0;
}

int gw_mem_alloc_managed_enter(struct pt_regs *ctx) /* (CUdeviceptr *, size_t, unsigned) */
{
	gw_alloc_enter(GW_KIND_MEM_ALLOC_MANAGED, ARG(1), ARG(2), 0, 0, 0, 0);
	return 0;
}

int gw_mem_alloc_async_enter(struct pt_regs *ctx) /* (CUdeviceptr *, size_t, CUstream) */
{
	gw_alloc_enter(GW_KIND_MEM_ALLOC_ASYNC, ARG(1), ARG(2), 0, 0, 0, 0);
	return 0;
}

int gw_mem_alloc_pool_enter(struct pt_regs *ctx) /* (CUdeviceptr *, size_t, pool, stream) */
{
	gw_alloc_enter(GW_KIND_MEM_ALLOC_POOL, ARG(1), ARG(2), 0, 0, 0, 0);
	return 0;
}

/* (CUdeviceptr *dptr, size_t *pPitch, size_t widthBytes, size_t height, unsigned elemSize):
 * the limit check uses width x height (pitch >= width); the ledger uses pitch x height. */
int gw_mem_alloc_pitch_enter(struct pt_regs *ctx)
{
	gw_alloc_enter(GW_KIND_MEM_ALLOC_PITCH, ARG(1), ARG(3) * ARG(4), ARG(2), ARG(4), 0, 0);
	return 0;
}

/* (CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, flags) */
int gw_vmm_create_enter(struct pt_regs *ctx)
{
	__s32 loc[2] = {};
	if (bpf_probe_read_user(loc, sizeof(loc), (void *)(ARG(3) + GW_MEMPROP_LOCATION_TYPE_OFF))) {
		gw_error(GW_ERR_READ_USER);
		loc[1] = GW_DEVICE_UNKNOWN;
	} else if (loc[0] != GW_MEM_LOCATION_TYPE_DEVICE) {
		loc[1] = GW_DEVICE_UNKNOWN;
	}
	gw_alloc_enter(GW_KIND_VMM_CREATE, ARG(1), ARG(2), 0, 0, loc[1], 1);
	return 0;
}

/* (CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) */
int gw_array_create_enter(struct pt_regs *ctx)
{
	struct gw_array_desc d = {};
	if (bpf_probe_read_user(&d, sizeof(d), (void *)ARG(2))) {
		gw_error(GW_ERR_READ_USER);
		return 0;
	}
	__u32 fb = gw_array_format_bytes(d.format);
	if (!fb)
		gw_error(GW_ERR_UNKNOWN_FORMAT);
	__u64 h = d.height ? d.height : 1;
	gw_alloc_enter(GW_KIND_ARRAY_CREATE, ARG(1), d.width * h * fb * d.num_channels, 0, 0, 0, 0);
	return 0;
}

static __always_inline __u64 gw_array3d_bytes(struct gw_array3d_desc *d)
{
	__u32 fb = gw_array_format_bytes(d->format);
	if (!fb)
		gw_error(GW_ERR_UNKNOWN_FORMAT);
	__u64 h = d->height ? d->height : 1;
	__u64 z = d->depth ? d->depth : 1;
	return d->width * h * z * fb * d->num_channels;
}

/* (CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) */
int gw_array3d_create_enter(struct pt_regs *ctx)
{
	struct gw_array3d_desc d = {};
	if (bpf_probe_read_user(&d, sizeof(d), (void *)ARG(2))) {
		gw_error(GW_ERR_READ_USER);
		return 0;
	}
	gw_alloc_enter(GW_KIND_ARRAY3D_CREATE, ARG(1), gw_array3d_bytes(&d), 0, 0, 0, 0);
	return 0;
}

/* max(1, x / 2) without a branch: the mipmap loop below is branch-free, or the verifier's
 * states multiply per level. */
static __always_inline __u64 gw_halve(__u64 x)
{
	__u64 half = x >> 1;
	return half + (((half | (0 - half)) >> 63) ^ 1);
}

/* (CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned levels):
 * level i has each extent halved i times, at least 1 (a 0 height or depth stays 1). */
int gw_mipmap_create_enter(struct pt_regs *ctx)
{
	struct gw_array3d_desc d = {};
	if (bpf_probe_read_user(&d, sizeof(d), (void *)ARG(2))) {
		gw_error(GW_ERR_READ_USER);
		return 0;
	}
	__u32 fb = gw_array_format_bytes(d.format);
	if (!fb)
		gw_error(GW_ERR_UNKNOWN_FORMAT);
	__u64 levels = (__u32)ARG(3);
	__u64 w = d.width, h = d.height ? d.height : 1, z = d.depth ? d.depth : 1, texels = 0;
#pragma unroll
	for (__u64 i = 0; i < 16; i++) {
		__u64 in_range = 0 - ((i - levels) >> 63); /* all ones while i < levels */
		texels += (w * h * z) & in_range;
		w = gw_halve(w);
		h = gw_halve(h);
		z = gw_halve(z);
	}
	gw_alloc_enter(GW_KIND_MIPMAP_CREATE, ARG(1), texels * fb * d.num_channels, 0, 0, 0, 0);
	return 0;
}

int gw_alloc_return_devptr(struct pt_regs *ctx)
{
	gw_alloc_return(ctx, GW_NS_DEVPTR);
	return 0;
}

int gw_alloc_return_vmm(struct pt_regs *ctx)
{
	gw_alloc_return(ctx, GW_NS_VMM);
	return 0;
}

int gw_alloc_return_array(struct pt_regs *ctx)
{
	gw_alloc_return(ctx, GW_NS_ARRAY);
	return 0;
}

int gw_alloc_return_mipmap(struct pt_regs *ctx)
{
	gw_alloc_return(ctx, GW_NS_MIPMAP);
	return 0;
}

/* ---- frees: entry only (the pointer is known at entry) ---- */

int gw_mem_free_enter(struct pt_regs *ctx) /* (CUdeviceptr) */
{
	gw_account_free(GW_NS_DEVPTR, ARG(1), GW_KIND_MEM_FREE);
	return 0;
}

int gw_mem_free_async_enter(struct pt_regs *ctx) /* (CUdeviceptr, CUstream) */
{
	gw_account_free(GW_NS_DEVPTR, ARG(1), GW_KIND_MEM_FREE_ASYNC);
	return 0;
}

int gw_vmm_release_enter(struct pt_regs *ctx) /* (CUmemGenericAllocationHandle) */
{
	gw_account_free(GW_NS_VMM, ARG(1), GW_KIND_VMM_RELEASE);
	return 0;
}

int gw_array_destroy_enter(struct pt_regs *ctx) /* (CUarray) */
{
	gw_account_free(GW_NS_ARRAY, ARG(1), GW_KIND_ARRAY_DESTROY);
	return 0;
}

int gw_mipmap_destroy_enter(struct pt_regs *ctx) /* (CUmipmappedArray) */
{
	gw_account_free(GW_NS_MIPMAP, ARG(1), GW_KIND_MIPMAP_DESTROY);
	return 0;
}

/* ---- contexts: which device each context is on, which context each thread has current ---- */

int gw_ctx_create_v2_enter(struct pt_regs *ctx) /* (CUcontext *, unsigned flags, CUdevice) */
{
	gw_ctx_enter(GW_KIND_CTX_CREATE, ARG(1), (__s32)ARG(3));
	return 0;
}

int gw_ctx_create_v3_enter(struct pt_regs *ctx) /* (CUcontext *, params *, int n, flags, dev) */
{
	gw_ctx_enter(GW_KIND_CTX_CREATE, ARG(1), (__s32)ARG(5));
	return 0;
}

int gw_ctx_create_v4_enter(struct pt_regs *ctx) /* (CUcontext *, CUctxCreateParams *, flags, dev) */
{
	gw_ctx_enter(GW_KIND_CTX_CREATE, ARG(1), (__s32)ARG(4));
	return 0;
}

int gw_ctx_create_return(struct pt_regs *ctx)
{
	gw_ctx_return(ctx, 1);
	return 0;
}

int gw_primary_retain_enter(struct pt_regs *ctx) /* (CUcontext *, CUdevice) */
{
	gw_ctx_enter(GW_KIND_PRIMARY_RETAIN, ARG(1), (__s32)ARG(2));
	return 0;
}

int gw_primary_retain_return(struct pt_regs *ctx)
{
	gw_ctx_return(ctx, 0);
	return 0;
}

int gw_primary_release_enter(struct pt_regs *ctx) /* (CUdevice) */
{
	if (gw_traced())
		gw_emit(GW_KIND_PRIMARY_RELEASE, (__s32)ARG(1), 0, 0, 0, 0);
	return 0;
}

int gw_ctx_destroy_enter(struct pt_regs *ctx) /* (CUcontext) */
{
	if (!gw_traced())
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	__s32 device = GW_DEVICE_UNKNOWN;
	struct gw_proc *p = procs.lookup(&pid);
	if (p) {
		struct gw_ctx_key k = {};
		k.ctx = ARG(1);
		k.gen = p->gen;
		k.pid = pid;
		__s32 *d = ctx_dev.lookup(&k);
		if (d)
			device = *d;
		ctx_dev.delete(&k);
	}
	struct gw_ctx_stack *s = ctx_stack.lookup(&tid);
	if (s && s->depth > 0 && s->depth <= GW_CTX_STACK &&
	    s->ctx[(s->depth - 1) & (GW_CTX_STACK - 1)] == ARG(1))
		s->depth -= 1;
	gw_emit(GW_KIND_CTX_DESTROY, device, 0, ARG(1), 0, 0);
	return 0;
}

int gw_ctx_set_current_enter(struct pt_regs *ctx) /* (CUcontext) */
{
	if (gw_traced())
		gw_stack_set((__u32)bpf_get_current_pid_tgid(), ARG(1));
	return 0;
}

int gw_ctx_push_enter(struct pt_regs *ctx) /* (CUcontext) */
{
	if (gw_traced())
		gw_stack_push((__u32)bpf_get_current_pid_tgid(), ARG(1));
	return 0;
}

int gw_ctx_pop_enter(struct pt_regs *ctx) /* (CUcontext *) */
{
	if (gw_traced())
		gw_stack_pop((__u32)bpf_get_current_pid_tgid());
	return 0;
}

/* ---- launches: one counter per process, entry probes only ---- */

int gw_launch_enter(struct pt_regs *ctx)
{
	if (!gw_traced())
		return 0;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u64 *n = launches.lookup(&pid);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	__u64 one = 1;
	if (launches.insert(&pid, &one) != 0) {
		n = launches.lookup(&pid);
		if (n)
			__sync_fetch_and_add(n, 1);
		else
			gw_error(GW_ERR_LAUNCHES_FULL);
	}
	return 0;
}

/* ---- process lifetime: the kernel clears the ledger, no user space needed ---- */

TRACEPOINT_PROBE(sched, sched_process_exit)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct gw_pending_key pk = {.tid = tid, .slot = GW_SLOT_ALLOC};
	pending.delete(&pk);
	pk.slot = GW_SLOT_CTX;
	pending.delete(&pk);
	ctx_stack.delete(&tid);
#ifdef GW_TP_HAS_GROUP_DEAD
	int group_dead = args->group_dead;
#else
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	int group_dead = task->signal->live.counter == 0;
#endif
	if (!group_dead)
		return 0;
	gw_clear_process(pid);
	launches.delete(&pid);
	kill_limits.delete(&pid);
	return 0;
}

/* exec replaces the image: the driver state of the old one is gone (its limit stays). */
TRACEPOINT_PROBE(sched, sched_process_exec)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u32 old = (__u32)args->old_pid;
	ctx_stack.delete(&pid);
	ctx_stack.delete(&old);
	gw_clear_process(pid);
	launches.delete(&pid);
	return 0;
}
