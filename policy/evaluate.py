"""Evaluation: one `Workload` against a compiled policy -> its `EffectiveRule`.

Precedence (documented in docs/policy.md): every field is decided on its own by the matching rule
of highest precedence that sets it; precedence is `weight` (default 0, higher wins), then source
order (later wins; an included file comes before the file that includes it).  What no matching
rule decides comes from the request, then the defaults block, then the built-in default; caps
then clamp or deny.  Pure and thread-safe: nothing here changes the policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from policy.compiled import UNCOMPILED, CompiledRule, Decision, by_precedence
from policy.index import RuleIndex
from policy.model import EffectiveRule, ResourceRequest, Workload
from policy.units import Memory, to_int
from policy.vocabulary import FIELDS, PLAIN, Parsed

__all__ = [
    "BUILTIN",
    "NODE_LABEL_GPU_MEMORY",
    "UNMANAGED_BUILTIN",
    "evaluate_rules",
    "exceeds",
    "matching",
    "unmanaged_rule",
]

# GPU feature discovery's node label with the GPU's memory in MiB: when a workload's node has
# it, a cap in MiB can be compared with a request in percent (and the other way round).
NODE_LABEL_GPU_MEMORY = "nvidia.com/gpu.memory"

# The built-in defaults, used for whatever the defaults block does not say, and those of
# processes on a GPU that no workload owns (by default none of their memory is allowed).
BUILTIN: Mapping[str, Parsed] = MappingProxyType(
    {f.key: f.builtin for f in FIELDS if f.builtin is not None})
UNMANAGED_BUILTIN: Mapping[str, Parsed] = MappingProxyType(
    {f.key: f.unmanaged_builtin for f in FIELDS if f.unmanaged_builtin is not None})

_OptInt = int | None


def matching(index: RuleIndex, workload: Workload) -> list[CompiledRule]:
    """The rules that match `workload`, highest precedence first."""
    out = {}
    for rule in index.candidates(workload):
        pred = rule._predicate
        if pred is UNCOMPILED:
            pred = rule.predicate
        if pred is None or pred(workload):
            out[rule.order] = rule  # a rule filed under two labels is a candidate twice
    return sorted(out.values(), key=by_precedence, reverse=True)


def evaluate_rules(defaults: Mapping[str, Decision], workload: Workload,
                   matched: Sequence[CompiledRule]) -> EffectiveRule:
    """The effective rule of `workload` given its matching rules (highest precedence first)
    and the defaults block."""
    return _Evaluation(defaults, workload, matched).result()


def unmanaged_rule(defaults: Mapping[str, Decision],
                   unmanaged: Mapping[str, Decision]) -> EffectiveRule:
    """The rule of processes on a GPU that no workload owns: the unmanaged block, then the
    built-in values for unmanaged processes, then the defaults block, then the built-ins."""
    decided: dict[str, str] = {}
    reasons: dict[str, str] = {}

    def get(key: str) -> object:
        if key in unmanaged:
            d = unmanaged[key]
            decided[key], reasons[key] = "unmanaged", f"{d.text} from the unmanaged block"
            return d.value
        if key in UNMANAGED_BUILTIN:
            p = UNMANAGED_BUILTIN[key]
            decided[key], reasons[key] = "built-in", f"{p.text} (built-in for unmanaged)"
            return p.value
        if key in defaults:
            d = defaults[key]
            decided[key], reasons[key] = "defaults", f"{d.text} from the defaults block"
            return d.value
        p = BUILTIN[key]
        decided[key], reasons[key] = "built-in", f"{p.text} (built-in default)"
        return p.value

    mem = get("gpumem")
    assert isinstance(mem, Memory)
    cores = to_int(get("gpucores"))
    # A plain setting the unmanaged block cannot take keeps its built-in value.
    plain: dict[str, Any] = {
        f.attr: get(f.key) if "unmanaged" in f.blocks else BUILTIN[f.key].value
        for f in PLAIN}
    return EffectiveRule(
        denied=None, gpu=1,
        gpumem_mib=mem.amount if mem.kind == "mib" else None,
        gpumem_percentage=mem.amount if mem.kind == "percent" else None,
        gpucores=cores, priority=1, **plain, decided_by=decided, reasons=reasons,
    )


class _Evaluation:
    """One workload against the matching rules; collects decided_by and reasons as it goes."""

    def __init__(self, defaults: Mapping[str, Decision], workload: Workload,
                 matched: Sequence[CompiledRule]) -> None:
        self.defaults, self.workload, self.matched = defaults, workload, matched
        self.decided: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.denied: str | None = None

    def pick(self, slot: str) -> tuple[CompiledRule, Decision] | None:
        for rule in self.matched:
            d = rule.sets.get(slot)
            if d is not None:
                return rule, d
        return None

    def fallback(self, key: str, field_name: str) -> object:
        d = self.defaults.get(key)
        if d is not None:
            self.decided[field_name] = "defaults"
            self.reasons[field_name] = f"{d.text} from the defaults block"
            return d.value
        p = BUILTIN[key]
        self.decided[field_name] = "built-in"
        self.reasons[field_name] = f"{p.text} (built-in default)"
        return p.value

    def setting(self, key: str) -> object:
        hit = self.pick(key)
        if hit:
            rule, d = hit
            self.decided[key] = rule.name
            self.reasons[key] = f'{d.text} set by rule "{rule.name}"'
            return d.value
        return self.fallback(key, key)

    def requested_or_default(self, key: str, requested: object, shown: str) -> object:
        if requested is not None:
            self.decided[key] = "request"
            self.reasons[key] = f"{shown} as requested"
            return requested
        hit = self.pick(f"default.{key}")
        if hit:
            rule, d = hit
            self.decided[key] = rule.name
            self.reasons[key] = f'{d.text}: default of rule "{rule.name}" (not requested)'
            return d.value
        return self.fallback(key, key)

    def cap(self, key: str, above: bool, value_text: str) -> Decision | None:
        """Apply the winning cap on `key`; returns the cap when the value must be lowered."""
        hit = self.pick(f"cap.{key}")
        if not hit or not above:
            return None
        rule, d = hit
        from_request = self.decided.get(key) == "request"
        if d.behaviour == "deny" and from_request:
            if self.denied is None:
                self.denied = (f"requested {key} {value_text} exceeds the cap {d.text} "
                               f'of rule "{rule.name}"')
                self.decided["denied"] = rule.name
            self.reasons[key] = (f"{value_text} requested, above the cap {d.text} of rule "
                                 f'"{rule.name}" (deny)')
            self.decided[key] = rule.name
            return None
        was = "requested" if from_request else "default"
        self.decided[key] = rule.name
        self.reasons[key] = f'{d.text}: clamped by rule "{rule.name}" ({was} {value_text})'
        return d

    def result(self) -> EffectiveRule:
        req = self.workload.request or ResourceRequest()
        hit = self.pick("admission")
        if hit and hit[1].value is not None:
            rule, d = hit
            self.denied = str(d.value) or f'denied by rule "{rule.name}"'
            self.decided["denied"] = rule.name
        elif hit:
            self.decided["denied"] = hit[0].name

        gpu_value = self.requested_or_default("gpu", req.gpu, str(req.gpu))
        gpu = to_int(gpu_value)
        c = self.cap("gpu", self._gpu_cap_exceeded(gpu), str(gpu))
        if c is not None:
            gpu = to_int(c.value)

        mem_mib, mem_pct, cap_mib, cap_pct = self._memory(req)

        cores = to_int(self.requested_or_default(
            "gpucores", req.gpucores, f"{req.gpucores}%"))
        hitc = self.pick("cap.gpucores")
        if hitc is not None:
            limit = to_int(hitc[1].value)
            c = self.cap("gpucores", limit < 100 and (cores == 0 or cores > limit),
                         "no limit (0%)" if cores == 0 else f"{cores}%")
            if c is not None:
                cores = limit

        priority = self._priority(req)
        plain: dict[str, Any] = {f.attr: self.setting(f.key) for f in PLAIN}
        return EffectiveRule(
            denied=self.denied,
            gpu=gpu,
            gpumem_mib=mem_mib,
            gpumem_percentage=mem_pct,
            gpucores=cores,
            priority=priority,
            **plain,
            decided_by=self.decided,
            gpumem_cap_mib=cap_mib,
            gpumem_cap_percentage=cap_pct,
            matched_rules=tuple(r.name for r in self.matched),
            reasons=self.reasons,
        )

    def _gpu_cap_exceeded(self, gpu: int) -> bool:
        hit = self.pick("cap.gpu")
        return hit is not None and gpu > to_int(hit[1].value)

    def _priority(self, req: ResourceRequest) -> int:
        hit = self.pick("priority")
        if hit:
            rule, d = hit
            self.decided["priority"] = rule.name
            shown = "" if req.priority is None else f" (request {_prio(req.priority)} overridden)"
            self.reasons["priority"] = f'{d.text} set by rule "{rule.name}"{shown}'
            return to_int(d.value)
        return to_int(self.requested_or_default(
            "priority", req.priority, _prio(req.priority)))

    def _memory(self, req: ResourceRequest) -> tuple[_OptInt, _OptInt, _OptInt, _OptInt]:
        if req.gpumem_mib is not None:
            requested: Memory | None = Memory("mib", req.gpumem_mib)
        elif req.gpumem_percentage is not None:
            requested = Memory("percent", req.gpumem_percentage)
        else:
            requested = None
        mem = self.requested_or_default("gpumem", requested,
                                        requested.describe() if requested else "")
        assert isinstance(mem, Memory)
        cap_mib = cap_pct = None
        hit = self.pick("cap.gpumem")
        if hit is not None:
            cap = hit[1].value
            assert isinstance(cap, Memory)
            above = exceeds(mem, cap, self.workload.node_labels.get(NODE_LABEL_GPU_MEMORY))
            if above is None:
                # Units differ and the GPU size is unknown here: the cap travels with the rule
                # and gpuwarden.limit.memory_limit applies it on the node.
                rule = hit[0]
                if cap.kind == "mib":
                    cap_mib = cap.amount
                else:
                    cap_pct = cap.amount
                self.reasons["gpumem"] = (self.reasons.get("gpumem", "") +
                                          f'; at most {cap.describe()} (cap of rule "{rule.name}",'
                                          " applied on the node)")
            else:
                c = self.cap("gpumem", above, mem.describe())
                if c is not None:
                    mem = cap
        if mem.kind == "mib":
            return mem.amount, None, cap_mib, cap_pct
        if mem.kind == "percent":
            return None, mem.amount, cap_mib, cap_pct
        return None, None, cap_mib, cap_pct


def _prio(p: int | None) -> str:
    return "high" if p == 0 else "low"


def exceeds(mem: Memory, cap: Memory, gpu_mib_label: str | None) -> bool | None:
    """Whether `mem` is above `cap`; None when that needs the GPU's size and it is unknown."""
    if cap.kind == "whole":
        return False
    if mem.kind == "whole":
        return True
    if mem.kind == cap.kind:
        return mem.amount > cap.amount
    try:
        total = int(gpu_mib_label) if gpu_mib_label is not None else None
    except ValueError:
        total = None
    if total is None or total <= 0:
        return None
    as_mib = [m.amount if m.kind == "mib" else total * m.amount // 100 for m in (mem, cap)]
    return as_mib[0] > as_mib[1]
