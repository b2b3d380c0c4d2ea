"""The probe table: which libcuda symbol gets which BPF function (bpf/progs/audit.c).

The single list of probed entry points; the loader attaches from it and the documentation
(docs/bpf.md) describes it.  Pure data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["PROBES", "REQUIRED_SYMBOLS", "Family", "Probe"]


class Family(Enum):
    ALLOC = "alloc"
    FREE = "free"
    CONTEXT = "context"
    LAUNCH = "launch"


@dataclass(frozen=True)
class Probe:
    symbol: str
    family: Family
    entry: str
    ret: str | None = None


_A, _F, _C, _L = Family.ALLOC, Family.FREE, Family.CONTEXT, Family.LAUNCH

PROBES: tuple[Probe, ...] = (
    Probe("cuMemAlloc_v2", _A, "gw_mem_alloc_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocPitch_v2", _A, "gw_mem_alloc_pitch_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocManaged", _A, "gw_mem_alloc_managed_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocAsync", _A, "gw_mem_alloc_async_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocAsync_ptsz", _A, "gw_mem_alloc_async_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocFromPoolAsync", _A, "gw_mem_alloc_pool_enter", "gw_alloc_return_devptr"),
    Probe("cuMemAllocFromPoolAsync_ptsz", _A, "gw_mem_alloc_pool_enter", "gw_alloc_return_devptr"),
    Probe("cuMemCreate", _A, "gw_vmm_create_enter", "gw_alloc_return_vmm"),
    Probe("cuArrayCreate_v2", _A, "gw_array_create_enter", "gw_alloc_return_array"),
    Probe("cuArray3DCreate_v2", _A, "gw_array3d_create_enter", "gw_alloc_return_array"),
    Probe("cuMipmappedArrayCreate", _A, "gw_mipmap_create_enter", "gw_alloc_return_mipmap"),
    Probe("cuMemFree_v2", _F, "gw_mem_free_enter"),
    Probe("cuMemFreeAsync", _F, "gw_mem_free_async_enter"),
    Probe("cuMemFreeAsync_ptsz", _F, "gw_mem_free_async_enter"),
    Probe("cuMemRelease", _F, "gw_vmm_release_enter"),
    Probe("cuArrayDestroy", _F, "gw_array_destroy_enter"),
    Probe("cuMipmappedArrayDestroy", _F, "gw_mipmap_destroy_enter"),
    Probe("cuCtxCreate_v2", _C, "gw_ctx_create_v2_enter", "gw_ctx_create_return"),
    Probe("cuCtxCreate_v3", _C, "gw_ctx_create_v3_enter", "gw_ctx_create_return"),
    Probe("cuCtxCreate_v4", _C, "gw_ctx_create_v4_enter", "gw_ctx_create_return"),
    Probe("cuCtxDestroy_v2", _C, "gw_ctx_destroy_enter"),
    Probe("cuDevicePrimaryCtxRetain", _C, "gw_primary_retain_enter", "gw_primary_retain_return"),
    Probe("cuDevicePrimaryCtxRelease_v2", _C, "gw_primary_release_enter"),
    Probe("cuDevicePrimaryCtxRelease", _C, "gw_primary_release_enter"),
    Probe("cuCtxSetCurrent", _C, "gw_ctx_set_current_enter"),
    Probe("cuCtxPushCurrent_v2", _C, "gw_ctx_push_enter"),
    Probe("cuCtxPopCurrent_v2", _C, "gw_ctx_pop_enter"),
    Probe("cuLaunchKernel", _L, "gw_launch_enter"),
    Probe("cuLaunchKernel_ptsz", _L, "gw_launch_enter"),
    Probe("cuLaunchKernelEx", _L, "gw_launch_enter"),
    Probe("cuLaunchKernelEx_ptsz", _L, "gw_launch_enter"),
    Probe("cuLaunchCooperativeKernel", _L, "gw_launch_enter"),
    Probe("cuLaunchCooperativeKernel_ptsz", _L, "gw_launch_enter"),
    Probe("cuGraphLaunch", _L, "gw_launch_enter"),
    Probe("cuGraphLaunch_ptsz", _L, "gw_launch_enter"),
)

# A library is only worth attaching to if it has these: the core of the ledger.
REQUIRED_SYMBOLS: tuple[str, ...] = ("cuMemAlloc_v2", "cuMemFree_v2")
