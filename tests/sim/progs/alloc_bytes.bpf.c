/* Uprobe on cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize): bytes and calls per process. */
#include <uapi/linux/ptrace.h>

BPF_HASH(alloc_bytes, u32, u64);
BPF_HASH(alloc_calls, u32, u64);

int on_cuMemAlloc_v2(struct pt_regs *ctx)
{
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u64 size = PT_REGS_PARM2(ctx);
    u64 zero = 0;
    u64 *bytes = alloc_bytes.lookup_or_try_init(&tgid, &zero);
    u64 *calls = alloc_calls.lookup_or_try_init(&tgid, &zero);
    if (bytes)
        __sync_fetch_and_add(bytes, size);
    if (calls)
        __sync_fetch_and_add(calls, 1);
    return 0;
}
