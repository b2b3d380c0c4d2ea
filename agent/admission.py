"""The standalone admission plan, pure: a `gpuwarden run` request, the policy's effective rule
for it and this machine's GPUs with what admitted workloads already hold -> the GPUs it gets,
its memory limit on each, and the environment that brings libvgpu in; or why not.

Placement is the extender's core (gpuwarden.placement.fit), so a machine and a cluster node
choose GPUs by the same rules. The daemon (agent.daemon) does the I/O around it: the region
file, the workload record, the process table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuwarden.annotations import (
    ContainerAssignment,
    DeviceGrant,
    GpuDevice,
    NodeInventory,
    PodAssignment,
)
from gpuwarden.limit import MemoryLimit, memory_limit, memory_limit_env
from gpuwarden.placement import ContainerRequest, Misfit, NodeState, PodRequest, fit, node_usage
from gpuwarden.resources import DEVICE_SPLIT_COUNT
from policy.model import MIB

__all__ = ["MARKER_ENV", "AdmissionRequest", "Gpu", "Held", "Plan", "Refusal", "admission_node",
           "parse_request", "plan_admission", "workload_env"]

MARKER_ENV = "GPUWARDEN_WORKLOAD"  # the workload id in a process's environment (agent.procfs)


class Gpu(Protocol):
    """One GPU of this machine as NVML named it (agent.nvml.Device)."""

    @property
    def uuid(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def total_bytes(self) -> int: ...


@dataclass(frozen=True)
class AdmissionRequest:
    """The control socket's `admit` request, its fields checked."""

    name: str
    namespace: str
    labels: dict[str, str]
    request: dict[str, Any]


def parse_request(req: Mapping[str, Any]) -> AdmissionRequest:
    """Raises TypeError or ValueError naming what is wrong with a field."""
    return AdmissionRequest(
        name=str(req.get("name") or "workload"),
        namespace=str(req.get("namespace") or "default"),
        labels={str(k): str(v) for k, v in dict(req.get("labels") or {}).items()},
        request=dict(req.get("request") or {}))


@dataclass(frozen=True)
class Held:
    """An admitted workload: its container, its GPUs (UUIDs) and its effective rule now."""

    container: str
    devices: Sequence[str]
    rule: Any  # policy.EffectiveRule


def admission_node(node: str, gpus: Sequence[Gpu], held: Iterable[Held],
                   split_count: int) -> NodeState:
    """This machine as the placement core sees it: its GPUs, each of `split_count` slices, and
    what the admitted workloads hold (their limits under the current policy)."""
    devices = tuple(GpuDevice(d.uuid, d.index, d.total_bytes // MIB, 100, d.name)
                    for d in gpus)
    assignments = []
    for h in held:
        grants = tuple(DeviceGrant(d.uuid, d.index,
                                   memory_limit(h.rule, d.total_bytes).within(d.total_bytes)
                                   // MIB, int(h.rule.gpucores))
                       for d in gpus if d.uuid in h.devices)
        assignments.append(PodAssignment(node, (ContainerAssignment(h.container, grants),)))
    return NodeState(node, NodeInventory(devices, split_count), node_usage(assignments))


@dataclass(frozen=True)
class Refusal:
    """Why a request is not admitted: `code` 1 (the policy or the machine says no) or 2 (it
    cannot be served), the message for the caller, and the audit event to write, if any."""

    code: int
    error: str
    event: Mapping[str, Any] | None = None
    decided_by: str | None = None

    def reply(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "code": self.code, "error": self.error}
        if self.decided_by is not None:
            out["decided_by"] = self.decided_by
        return out


@dataclass(frozen=True)
class Plan:
    """An admitted request: the GPUs it gets (in placement order) and its limit on each."""

    gpus: tuple[Gpu, ...]
    limits: tuple[MemoryLimit, ...]  # one per GPU
    gpucores: int  # percent of each GPU; 0: no compute limit
    rule: Any = field(repr=False)  # policy.EffectiveRule

    @property
    def devices(self) -> list[str]:
        return [d.uuid for d in self.gpus]


def plan_admission(req: AdmissionRequest, eff: Any, container: str, node: str,
                   gpus: Sequence[Gpu], held: Callable[[], Iterable[Held]],
                   no_gpu_reason: str, split_count: int = DEVICE_SPLIT_COUNT) -> Plan | Refusal:
    """The GPUs and limits for a request whose effective rule is `eff`, on this machine
    (`node`, its `gpus` of `split_count` slices each, the workloads it `held` already: asked
    for only when placing); `no_gpu_reason` says why `gpus` is empty when it is."""
    who = {"namespace": req.namespace, "pod": req.name}
    if eff.denied is not None:
        return Refusal(1, f"denied by policy: {eff.denied}",
                       {"event": "admission_denied", "workload": who, "reason": eff.denied},
                       decided_by=eff.decided_by.get("denied", ""))
    if not gpus:
        return Refusal(2, "no GPU to run on: NVML is unavailable "
                       f"({no_gpu_reason}); on a machine without a GPU start the agent with "
                       "the simulated GPU (gpuwarden sim env)")
    placed = fit(admission_node(node, gpus, held(), split_count),
                 PodRequest((ContainerRequest(container, eff),)))
    if isinstance(placed, Misfit):
        return Refusal(1, "no GPU of this machine has room: "
                       + placed.reason.removeprefix("gpuwarden: "),
                       {"event": "admission_refused", "workload": who,
                        "reason": placed.reason})
    by_uuid = {d.uuid: d for d in gpus}
    chosen = tuple(by_uuid[g.uuid] for g in placed.assignment.containers[0].devices)
    return Plan(chosen, tuple(memory_limit(eff, d.total_bytes) for d in chosen),
                int(eff.gpucores or 0), eff)


def workload_env(plan: Plan, wid: str, region: str, shim: str, ld_preload: str,
                 all_gpus: int) -> dict[str, str]:
    """The environment a workload's command runs with: libvgpu preloaded (before what
    `ld_preload` already had), its region and limits, its priority, the workload marker, and
    CUDA_VISIBLE_DEVICES when it gets fewer than the machine's `all_gpus` GPUs."""
    eff = plan.rule
    env = {
        "LD_PRELOAD": f"{shim}:{ld_preload}" if ld_preload else shim,
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": region,
        **memory_limit_env(plan.limits),
        "GPU_CORE_UTILIZATION_POLICY": str(eff.core_policy),
        "CUDA_TASK_PRIORITY": str(eff.priority),
        "ACTIVE_OOM_KILLER": "false",
        MARKER_ENV: wid,
    }
    if eff.gpucores:
        env["CUDA_DEVICE_SM_LIMIT"] = str(int(eff.gpucores))
    if len(plan.gpus) < all_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(plan.devices)
    return env
