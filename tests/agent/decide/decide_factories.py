"""Builders for decide() tests: literal workloads, rules and snapshots, nothing measured."""

from __future__ import annotations

from agent.decide import AgentPolicy
from agent.model import GpuUuid, Mode, Pid, Response, Rule, Snapshot, Workload, WorkloadKey
from gpuwarden.limit import MemoryLimit

GPU = GpuUuid("GPU-0000")
GPU2 = GpuUuid("GPU-0001")
MiB = 1 << 20


def rule(limit: int | None = 1000 * MiB, **kw: object) -> Rule:
    """A rule whose memory limit is `limit` bytes on every GPU (None: unlimited)."""
    base: dict[str, object] = {"name": "r", "memory_limit_default": MemoryLimit(limit),
                               "response": Response.KILL, "grace_seconds": 10.0,
                               "bypass_tolerance_bytes": 64 * MiB, "mode": Mode.ENFORCE}
    base.update(kw)
    return Rule(**base)


def workload(wid: str = "w1", pids: tuple[int, ...] = (100,), r: Rule | None = None,
             shim: dict[int, dict[GpuUuid, int]] | None = None,
             node_region: bool = True) -> Workload:
    """`node_region` False: its shims see no node region (they cannot coordinate compute)."""
    used = _totals(shim if shim is not None else {})
    return Workload(
        wid=wid, key=WorkloadKey("default", wid), rule=r or rule(),
        pids=frozenset(Pid(p) for p in pids),
        shim_used=used,
        shim_pids=frozenset(Pid(p) for p in (shim or {})),
        shim_node_unknown=frozenset() if node_region else frozenset(used),
    )


def _totals(shim: dict[int, dict[GpuUuid, int]]) -> dict[GpuUuid, int]:
    out: dict[GpuUuid, int] = {}
    for per in shim.values():
        for g, b in per.items():
            out[g] = out.get(g, 0) + b
    return out


def policy(**kw: object) -> AgentPolicy:
    base: dict[str, object] = {"unmanaged": rule(name="unmanaged", response=Response.ALERT,
                                                 limit=None),
                               "nvml_confirm_seconds": 0.0}
    base.update(kw)
    return AgentPolicy(**base)


def snap(*ws: Workload, ebpf: dict[int, dict[GpuUuid, int]] | None = None,
         nvml: dict[int, dict[GpuUuid, int]] | None = None,
         sm: dict[int, dict[GpuUuid, float]] | None = None, **kw: object) -> Snapshot:
    def pids(d: dict[int, dict[GpuUuid, int]] | None) -> dict[Pid, dict[GpuUuid, int]] | None:
        return None if d is None else {Pid(p): v for p, v in d.items()}

    sm_view = None if sm is None else {Pid(p): v for p, v in sm.items()}
    return Snapshot(workloads=ws, ebpf=pids(ebpf), nvml_memory=pids(nvml), nvml_sm=sm_view,
                    **kw)
