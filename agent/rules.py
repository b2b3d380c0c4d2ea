"""Translation between the policy package and the agent: `gpuwarden run` flags to a
policy.Workload, and a policy.EffectiveRule to the agent's own Rule (agent.model), so decide()
never depends on the policy package's types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.model import GpuUuid, Mode, Response, Rule
from gpuwarden.limit import memory_limit
from policy.vocabulary import TO_AGENT

__all__ = ["parse_cores", "parse_size_mib", "request_from_flags", "to_rule"]


def parse_size_mib(text: str, flag: str = "--gpumem") -> int:
    """A memory size in the one syntax of policy.units (a bare number is MiB) -> MiB."""
    from policy.units import UnitError
    from policy.units import parse_size_mib as parse

    try:
        return parse(text)
    except UnitError as err:
        raise ValueError(f"{flag} {text!r}: {err}; {err.hint}") from None


def parse_cores(text: str | int, flag: str = "--gpucores") -> int:
    """A share of one GPU's compute: 30 or 30% (as policies write it) -> 30."""
    t = str(text).strip()
    digits = t[:-1] if t.endswith("%") else t
    if not digits.isdigit() or not 0 <= int(digits) <= 100:
        raise ValueError(f"{flag} {text!r}: use 0..100 or 0%..100% (percent of one GPU; "
                         "0 = no compute limit)")
    return int(digits)


def request_from_flags(gpumem: str | None, gpumem_percentage: int | None,
                       gpucores: str | int | None, priority: str | None,
                       gpu: int | None) -> dict[str, int | None]:
    if gpumem is not None and gpumem_percentage is not None:
        raise ValueError("--gpumem and --gpumem-percentage: give one of them, not both")
    if gpumem_percentage is not None and not 1 <= gpumem_percentage <= 100:
        raise ValueError(f"--gpumem-percentage {gpumem_percentage}: use 1..100")
    cores = parse_cores(gpucores) if gpucores is not None else None
    if priority not in (None, "high", "low", "0", "1"):
        raise ValueError(f"--priority {priority!r}: use high or low")
    if gpu is not None and gpu < 1:
        raise ValueError(f"--gpu {gpu}: use 1 or more")
    return {
        "gpu": gpu if gpu is not None else 1,
        "gpumem_mib": parse_size_mib(gpumem) if gpumem is not None else None,
        "gpumem_percentage": gpumem_percentage,
        "gpucores": cores,
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


def to_rule(eff: Any, gpu_totals: Mapping[str, int | None], name: str = "") -> Rule:
    """The agent's Rule for one effective rule: the memory limit on each GPU of `gpu_totals`
    (the workload's GPUs by UUID, each with its memory in bytes, None when unknown), and on
    any other GPU the limit resolved without a size (absolute sizes and the MiB cap only)."""
    ov = eff.on_violation
    matched = tuple(getattr(eff, "matched_rules", ()) or ())
    rule_name = name or ("+".join(matched) if matched else "defaults")
    return Rule(
        name=rule_name,
        mode=Mode(eff.mode),
        denied=eff.denied is not None,
        denied_reason=eff.denied or "",
        gpus=int(eff.gpu),
        memory_limits={GpuUuid(u): memory_limit(eff, total) for u, total in gpu_totals.items()},
        memory_limit_default=memory_limit(eff, None),
        cores_percent=int(eff.gpucores or 0),
        priority="high" if eff.priority == 0 else "low",
        response=Response(ov.action),
        grace_seconds=float(ov.grace_seconds),
        alert_name=ov.alert,
        severity=str(ov.severity),
        alert_rule=(getattr(eff, "decided_by", None) or {}).get("on_violation", "defaults"),
        **{f.agent: f.to_agent(getattr(eff, f.attr)) for f in TO_AGENT},
    )
