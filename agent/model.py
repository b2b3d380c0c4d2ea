"""The agent's data model: what a workload is, what each source measured, what was decided.

Plain frozen dataclasses and enums only; nothing here performs I/O or imports an I/O library, so
the decision code and its tests build these as literals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, NewType

from gpuwarden.limit import UNLIMITED, MemoryLimit

__all__ = [
    "Action",
    "ActionKind",
    "CgroupId",
    "GpuUuid",
    "History",
    "Mode",
    "Ongoing",
    "Pid",
    "Response",
    "Rule",
    "Snapshot",
    "Source",
    "Verdict",
    "VerdictKind",
    "ViolationLabels",
    "Workload",
    "WorkloadKey",
]

Pid = NewType("Pid", int)
GpuUuid = NewType("GpuUuid", str)
CgroupId = NewType("CgroupId", int)

PerGpu = Mapping[GpuUuid, int]


class Mode(StrEnum):
    AUDIT = "audit"
    ENFORCE = "enforce"


class Response(StrEnum):
    """What the policy says to do about a violation."""

    ALERT = "alert"
    TERMINATE = "terminate"
    KILL = "kill"


class Source(StrEnum):
    SHIM = "shim"
    EBPF = "ebpf"
    NVML = "nvml"


class VerdictKind(StrEnum):
    MEMORY = "memory"  # over the memory limit
    COMPUTE = "compute"  # over the compute share for longer than allowed
    BYPASS = "bypass"  # on the GPU without the shim, or above the shim's count
    DENIED = "denied"  # on the GPU although the policy denies it any GPU


class ActionKind(StrEnum):
    ALERT = "alert"
    TERMINATE = "terminate"  # SIGTERM
    KILL = "kill"  # SIGKILL
    ARM = "arm"  # set the in-kernel eBPF kill limit for a process
    DISARM = "disarm"


@dataclass(frozen=True)
class WorkloadKey:
    """Who a workload is, as metric labels see it (never a PID)."""

    namespace: str
    pod: str
    container: str = "main"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


@dataclass(frozen=True)
class Rule:
    """The agent's view of one effective policy rule (see `agent.rules` for the translation).

    `memory_limits`: the memory limit on each GPU of the workload, by UUID, resolved from that
    GPU's size; `memory_limit_default`: on any other GPU (resolved without a size: absolute
    sizes only, else unlimited). `cores_percent` 0 means no compute cap.
    """

    name: str
    mode: Mode = Mode.ENFORCE
    denied: bool = False
    denied_reason: str = ""
    gpus: int = 1
    memory_limits: Mapping[GpuUuid, MemoryLimit] = field(default_factory=dict)
    memory_limit_default: MemoryLimit = UNLIMITED
    cores_percent: int = 0
    priority: str = "low"
    core_policy: str = "default"
    response: Response = Response.ALERT
    grace_seconds: float = 0.0
    compute_grace_seconds: float = 0.0
    bypass_tolerance_bytes: int = 0
    alert_name: str = "GpuSliceViolation"  # agent.rules sets the policy's own
    severity: str = "warning"
    alert_rule: str = ""  # the policy rule that decided on_violation ("defaults": none did)

    def memory_limit(self, gpu: GpuUuid) -> MemoryLimit:
        """The memory limit on `gpu`."""
        return self.memory_limits.get(gpu, self.memory_limit_default)


@dataclass(frozen=True)
class Workload:
    wid: str
    key: WorkloadKey
    rule: Rule
    pids: frozenset[Pid] = frozenset()
    # The shim's view from the workload's region: bytes admitted per GPU, and which processes
    # run the shim. shim_used is None when the region could not be read (see region_error).
    shim_used: PerGpu | None = None
    shim_pids: frozenset[Pid] = frozenset()
    # Processes of the workload that the shim listed and no longer does, while they still run:
    # libvgpu releases a process's slot in an atexit handler, and its memory stays on the GPU
    # until the process has exited (destructors, the driver's teardown). Leaving, not bypassing,
    # for a grace (agent.workloads.EXIT_GRACE).
    shim_leaving: frozenset[Pid] = frozenset()
    # GPUs on which its shims see no node region (libvgpu's NODE_UNKNOWN flag): there they cannot
    # coordinate compute with the other containers themselves
    shim_node_unknown: frozenset[GpuUuid] = frozenset()
    region_error: str = ""
    managed: bool = True  # False for the pseudo-workload of one unmanaged GPU process


@dataclass(frozen=True)
class Snapshot:
    """Everything decide() needs, taken at one instant. Sources that are off are None."""

    workloads: tuple[Workload, ...]
    ebpf: Mapping[Pid, PerGpu] | None = None
    nvml_memory: Mapping[Pid, PerGpu] | None = None
    nvml_sm: Mapping[Pid, Mapping[GpuUuid, float]] | None = None  # ratio 0..1 of one GPU
    history: History = field(default_factory=dict)
    armed: Mapping[Pid, int] = field(default_factory=dict)  # in-kernel kill limits now set
    ebpf_can_kill: bool = False


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    wid: str
    key: WorkloadKey
    gpu: GpuUuid
    rule: str
    measured: Mapping[str, int | float | None]  # per source, plus derived numbers
    limit: int | float | None
    detail: str
    sources: tuple[str, ...] = ()  # which sources the evidence comes from

    @property
    def vkey(self) -> tuple[str, VerdictKind, GpuUuid]:
        return (self.wid, self.kind, self.gpu)


@dataclass(frozen=True)
class Ongoing:
    """What is remembered about one violation that is still going on."""

    since: float  # first seen
    alerted: bool = False
    terminated_at: float | None = None
    killed: bool = False


History = Mapping[tuple[str, VerdictKind, GpuUuid], Ongoing]


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    wid: str
    key: WorkloadKey
    pids: tuple[Pid, ...] = ()
    verdict: Verdict | None = None
    dry: bool = False  # record "would <kind>" instead of acting (dry run, audit mode)
    protected: tuple[Pid, ...] = ()  # pids spared because they are protected
    limit_bytes: int = 0  # for ARM
    reason: str = ""  # for ALERT: the policy's alert name
    severity: str = ""  # for ALERT: the policy's severity
    policy_rule: str = ""  # for ALERT: the policy rule that decided the response


class ViolationLabels(NamedTuple):
    """What one violation counter is counted by (the metric's labels, never a PID): the
    workload, the GPU, the check that failed, and the policy's rule, alert name and severity,
    so that alert rules can route on what the policy says."""

    key: WorkloadKey
    gpu: str
    check: str  # a VerdictKind
    policy_rule: str
    alert: str
    severity: str
