"""What the policy is evaluated on (a `Workload`) and what it yields (an `EffectiveRule`).

Plain frozen dataclasses with no Kubernetes types: the agent builds a `Workload` from a pod or
from `gpuwarden run` flags, and reads the `EffectiveRule` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Literal

from policy.units import MIB

__all__ = [
    "MIB",
    "Action",
    "CorePolicy",
    "EffectiveRule",
    "Mode",
    "ResourceRequest",
    "ViolationResponse",
    "Workload",
]


Action = Literal["alert", "terminate", "kill"]
AlertSeverity = Literal["info", "warning", "critical"]
CorePolicy = Literal["default", "force", "disable"]
Mode = Literal["audit", "enforce"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """What a container asked for (the `nvidia.com/*` limits); None = not requested."""

    gpu: int | None = 1
    gpumem_mib: int | None = None
    gpumem_percentage: int | None = None
    gpucores: int | None = None
    priority: int | None = None  # 0 high, 1 low

    def to_json(self) -> dict[str, int | None]:
        return {
            "gpu": self.gpu,
            "gpumem_mib": self.gpumem_mib,
            "gpumem_percentage": self.gpumem_percentage,
            "gpucores": self.gpucores,
            "priority": self.priority,
        }


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str = "default"
    name: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    container: str = ""
    node: str = ""
    node_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    request: ResourceRequest = field(default_factory=ResourceRequest)

    def to_json(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "container": self.container,
            "node": self.node,
            "node_labels": dict(self.node_labels),
            "request": self.request.to_json(),
        }


# The alert name of an `on_violation` that gives none (metrics, audit events, alert rules).
DEFAULT_ALERT_NAME = "GpuSliceViolation"


@dataclass(frozen=True, slots=True)
class ViolationResponse:
    """What happens when a workload exceeds its slice: `action` after `grace_seconds`."""

    action: Action = "kill"
    grace_seconds: float = 10.0
    alert_name: str | None = None
    severity: AlertSeverity = "critical"

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.action,
            "grace_seconds": self.grace_seconds,
            "alert_name": self.alert_name,
            "severity": self.severity,
        }

    @property
    def alert(self) -> str:
        """The alert name it raises (DEFAULT_ALERT_NAME when the policy gives none)."""
        return self.alert_name or DEFAULT_ALERT_NAME

    def describe(self) -> str:
        name = f' "{self.alert_name}"' if self.alert_name else ""
        if self.action == "alert":
            return f"alert{name} severity {self.severity}"
        alert = f" alert{name}" if name else ""
        return f"{self.action} after {self.grace_seconds:g}s{alert} severity {self.severity}"


@dataclass(frozen=True, kw_only=True)
class EffectiveRule:
    """The limits and responses that apply to one workload (or to unmanaged processes).

    Memory: exactly one of `gpumem_mib` / `gpumem_percentage` is set, or neither (the whole GPU).
    A cap written in the other unit than the request cannot be applied without the GPU's size; it
    is kept in `gpumem_cap_mib` / `gpumem_cap_percentage`, and `gpuwarden.limit.memory_limit`
    applies it on each GPU.

    The attributes are declared in the order `to_json` (explain's JSON) lists them, and
    `to_json` is derived from these declarations: a new field is only its declaration here.
    """

    denied: str | None
    gpu: int
    gpumem_mib: int | None
    gpumem_percentage: int | None
    gpumem_cap_mib: int | None = None
    gpumem_cap_percentage: int | None = None
    gpucores: int
    priority: int
    core_policy: CorePolicy
    mode: Mode
    on_violation: ViolationResponse
    compute_grace_seconds: float
    bypass_tolerance_mib: int
    decided_by: dict[str, str]
    matched_rules: tuple[str, ...] = ()
    # Per field, one sentence on how the value came about (explain prints these).
    reasons: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """Every field, in declaration order, as plain JSON values."""
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}


def _json(value: object) -> object:
    """A field's value as JSON: nested model objects by their own `to_json`, a tuple as a list,
    a mapping as a fresh dict."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value
