"""Translation between the policy package and the agent: `gpuwarden run` flags to a
policy.Workload, and a policy.EffectiveRule to the agent's own Rule (agent.model), so decide()
never depends on the policy package's types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.model import Mode, Response, Rule
from policy.vocabulary import TO_AGENT

__all__ = ["MIB", "parse_size_mib", "request_from_flags", "to_rule"]

MIB = 1 << 20
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": MIB, "mib": MIB, "g": 1 << 30,
          "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def parse_size_mib(text: str, flag: str = "--gpumem") -> int:
    """'3GiB', '3000MiB', '512M' or a plain number of MiB -> MiB (whole, rounded down)."""
    t = text.strip()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = t[len(num):].lower()
    if not num.isdigit() or (unit and unit not in _UNITS):
        raise ValueError(f"{flag} {text!r}: not a size; use MiB as a number (3000) or a number "
                         "with KiB, MiB, GiB or TiB (e.g. 3GiB)")
    return int(num) if not unit else int(num) * _UNITS[unit] // MIB


def request_from_flags(gpumem: str | None, gpumem_percentage: int | None,
                       gpucores: int | None, priority: str | None,
                       gpu: int | None) -> dict[str, int | None]:
    if gpumem is not None and gpumem_percentage is not None:
        raise ValueError("--gpumem and --gpumem-percentage: give one of them, not both")
    if gpumem_percentage is not None and not 1 <= gpumem_percentage <= 100:
        raise ValueError(f"--gpumem-percentage {gpumem_percentage}: use 1..100")
    if gpucores is not None and not 0 <= gpucores <= 100:
        raise ValueError(f"--gpucores {gpucores}: use 0..100 (percent of one GPU)")
    if priority not in (None, "high", "low", "0", "1"):
        raise ValueError(f"--priority {priority!r}: use high or low")
    if gpu is not None and gpu < 1:
        raise ValueError(f"--gpu {gpu}: use 1 or more")
    return {
        "gpu": gpu if gpu is not None else 1,
        "gpumem_mib": parse_size_mib(gpumem) if gpumem is not None else None,
        "gpumem_percentage": gpumem_percentage,
        "gpucores": gpucores,
        "priority": None if priority is None else (0 if priority in ("high", "0") else 1),
    }


def policy_workload(namespace: str, name: str, labels: Mapping[str, str],
                    request: Mapping[str, int | None], node: str = "",
                    annotations: Mapping[str, str] | None = None, container: str = "main",
                    node_labels: Mapping[str, str] | None = None) -> Any:
    from policy import ResourceRequest, Workload

    return Workload(namespace=namespace, name=name, labels=dict(labels),
                    annotations=dict(annotations or {}), container=container, node=node,
                    node_labels=dict(node_labels or {}), request=ResourceRequest(**request))


def to_rule(eff: Any, gpu_total_bytes: int | None, name: str = "") -> Rule:
    """The agent's Rule for one effective rule on GPUs of `gpu_total_bytes` (None: unknown,
    then only an absolute gpumem gives a limit)."""
    ov = eff.on_violation
    matched = tuple(getattr(eff, "matched_rules", ()) or ())
    rule_name = name or ("+".join(matched) if matched else "defaults")
    if gpu_total_bytes is not None:
        limit: int | None = eff.memory_limit_bytes(gpu_total_bytes)
    elif eff.gpumem_mib is not None:
        limit = eff.gpumem_mib * MIB
    else:
        limit = None
    return Rule(
        name=rule_name,
        mode=Mode(eff.mode),
        denied=eff.denied is not None,
        denied_reason=eff.denied or "",
        gpus=int(eff.gpu),
        memory_limit_bytes=limit,
        cores_percent=int(eff.gpucores or 0),
        priority="high" if eff.priority == 0 else "low",
        response=Response(ov.action),
        grace_seconds=float(ov.grace_seconds),
        alert_name=ov.alert_name or "GpuSliceViolation",
        severity=str(ov.severity),
        alert_rule=(getattr(eff, "decided_by", None) or {}).get("on_violation", "defaults"),
        **{f.agent: f.to_agent(getattr(eff, f.attr)) for f in TO_AGENT},
    )
