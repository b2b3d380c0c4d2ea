"""Prometheus alerting rules named as the policy names its alerts: for each alert name an
`on_violation` gives (rules, defaults, unmanaged), one rule that fires while the agent counts
violations with that name. Pure: a CompiledPolicy in, a rule-file document (plain data) out.

The agent labels `gpuwarden_violations_total` with `alert`, `severity`, `policy_rule` and
`check`, and an alerting rule keeps its series' labels, so the severity each rule of the policy
gives travels with the alert.
"""

from __future__ import annotations

from typing import Any

from policy.compiler import CompiledPolicy
from policy.model import ViolationResponse

__all__ = ["alert_rules", "policy_alerts"]


def policy_alerts(policy: CompiledPolicy) -> dict[str, list[tuple[str, str]]]:
    """alert name -> [(the rule, `defaults` or `unmanaged` that gives it, its severity)]."""
    found: dict[str, list[tuple[str, str]]] = {}
    blocks = [(r.name, r.sets) for r in policy.rules]
    blocks += [("defaults", policy.defaults), ("unmanaged", policy.unmanaged_settings)]
    for name, sets in blocks:
        decision = sets.get("on_violation")
        if decision is not None and isinstance(decision.value, ViolationResponse):
            ov = decision.value
            found.setdefault(ov.alert, []).append((name, ov.severity))
    if "on_violation" not in policy.defaults:  # the built-in response raises the default name
        found.setdefault(ViolationResponse().alert, []).append(("built-in", "critical"))
    return dict(sorted(found.items()))


def alert_rules(policy: CompiledPolicy, window: str = "5m",
                group: str = "gpuwarden.policy-alerts") -> dict[str, Any]:
    """A Prometheus rule file (as data): one alerting rule per alert name of the policy."""
    rules = []
    for alert, givers in policy_alerts(policy).items():
        where = ", ".join(f"{rule} ({severity})" for rule, severity in givers)
        rules.append({
            "alert": alert,
            "expr": f'increase(gpuwarden_violations_total{{alert="{alert}"}}[{window}]) > 0',
            "annotations": {
                "summary": "{{ $labels.namespace }}/{{ $labels.pod }} failed the "
                           "{{ $labels.check }} check on GPU {{ $labels.gpu_uuid }} "
                           "(policy rule {{ $labels.policy_rule }})",
                "description": f"Given by the policy's {where}. The agent's audit events "
                               "(event violation) hold the evidence and the action taken.",
            },
        })
    return {"groups": [{"name": group, "rules": rules}]}
