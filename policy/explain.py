"""`explain`: the effective limits of a workload, which rule decided each field, and which rules
it overrode (the precedence, made visible)."""

from __future__ import annotations

from typing import Any

from policy.compiler import CompiledPolicy
from policy.evaluate import evaluate_rules
from policy.model import Workload
from policy.vocabulary import EFFECTIVE

__all__ = ["FIELD_SLOTS", "explain_workload", "render_explanation"]

# Which rule statements can decide each effective field.
FIELD_SLOTS: dict[str, tuple[str, ...]] = {
    "denied": ("admission",),  # a cap with `deny` shows under its own field
    **{f.key: f.slots for f in EFFECTIVE},
}


def _slot_text(slot: str, text: str, behaviour: str) -> str:
    if slot.startswith("default."):
        return f"default {slot[8:]} = {text}"
    if slot.startswith("cap."):
        return f"cap {slot[4:]} <= {text} {behaviour}"
    if slot == "admission":
        return text
    return f"{slot} = {text}"


def explain_workload(policy: CompiledPolicy, workload: Workload, *, init: bool = False,
                     uses_gpu: bool = True) -> dict[str, Any]:
    matched = policy.matching(workload)
    effective = evaluate_rules(policy.defaults, workload, matched)  # matched once, not twice
    e = effective.to_json()
    values: dict[str, str] = {
        "denied": f"DENIED: {effective.denied}" if effective.denied else "allowed",
        **{f.key: f.explain(effective) for f in EFFECTIVE if f.explain is not None},
    }
    fields = []
    for name, slots in FIELD_SLOTS.items():
        winner = effective.decided_by.get(name, "")
        statements = []
        for slot in slots:
            first: str | None = None
            for rule in matched:  # highest precedence first
                d = rule.sets.get(slot)
                if d is None:
                    continue
                status = "applies" if first is None else f"overridden by {first!r}"
                first = first or rule.name
                statements.append({"rule": rule.name, "status": status,
                                   "statement": _slot_text(slot, d.text, d.behaviour)})
        fields.append({"field": name, "value": values[name], "decided_by": winner or "-",
                       "reason": effective.reasons.get(name, ""), "statements": statements})
    return {
        "container": workload.container,
        "init": init,
        "uses_gpu": uses_gpu,
        "request": workload.request.to_json(),
        "allowed": effective.denied is None,
        "matched": [{"rule": r.name, "weight": r.weight, "position": r.order + 1,
                     "file": r.span.file, "line": r.span.line} for r in matched],
        "fields": fields,
        "effective": e,
    }


def _request_text(req: dict[str, Any]) -> str:
    parts = []
    for key, label in (("gpu", "gpu"), ("gpumem_mib", "gpumem"),
                       ("gpumem_percentage", "gpumem-percentage"), ("gpucores", "gpucores"),
                       ("priority", "priority")):
        v = req.get(key)
        if v is not None:
            unit = "MiB" if key == "gpumem_mib" else "%" if key in (
                "gpumem_percentage", "gpucores") else ""
            parts.append(f"{label}={v}{unit}")
    return " ".join(parts) or "(nothing)"


def render_explanation(pods: list[dict[str, Any]], digest: str) -> str:
    out: list[str] = []
    for pod in pods:
        out.append(f"pod {pod.get('namespace')}/{pod.get('name')} ({pod['source']}), "
                   f"policy {digest[:12]}")
        if not pod["containers"]:
            out.append("  no container asks for a GPU resource: gpuwarden leaves this pod alone")
        for c in pod["containers"]:
            kind = "init container" if c["init"] else "container"
            verdict = "ALLOWED" if c["allowed"] else "DENIED"
            note = "" if c["uses_gpu"] else " (asks for no GPU resource)"
            out.append(f"  {kind} {c['container']!r}: {verdict}{note}")
            out.append(f"    requested: {_request_text(c['request'])}")
            if c["matched"]:
                ranked = ", ".join(
                    f"{m['rule']!r} (weight {m['weight']}, #{m['position']} "
                    f"{m['file']}:{m['line']})" for m in c["matched"])
                out.append(f"    matched rules, highest precedence first: {ranked}")
            else:
                out.append("    matched rules: none (defaults apply)")
            width = max(len(f["field"]) for f in c["fields"])
            for f in c["fields"]:
                by = f["decided_by"]
                out.append(f"    {f['field']:<{width}}  {f['value']:<24} <- {by}")
                if f["reason"] and f["field"] != "denied":
                    out.append(f"    {'':<{width}}    {f['reason']}")
                for st in f["statements"]:
                    if st["status"] != "applies" or st["rule"] != by:
                        out.append(f"    {'':<{width}}    {st['rule']!r}: {st['statement']} "
                                   f"({st['status']})")
        out.append("")
    return "\n".join(out)
