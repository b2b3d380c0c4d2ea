"""Syntax trees -> `CompiledPolicy`: validation, precedence, analysis, an index, evaluation.

Precedence (documented in docs/policy.md): every field is decided on its own by the matching rule
of highest precedence that sets it; precedence is `weight` (default 0, higher wins), then source
order (later wins; an included file comes before the file that includes it).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy import ast
from policy.diagnostics import Diagnostic, Severity, Span, closest, source_lines
from policy.fastinit import fast_init
from policy.matching import (
    Conjunct,
    Predicate,
    compile_expr,
    conjunct_satisfiable,
    dnf,
    implies,
    index_keys,
    pinned_values,
    validate_expr,
)
from policy.model import EffectiveRule, ResourceRequest, Workload
from policy.printer import format_expr
from policy.units import Memory, to_int
from policy.vocabulary import (
    BLOCK_SETTINGS,
    CAP_KEYS,
    DEFAULT_KEYS,
    FIELD,
    FIELDS,
    PLAIN,
    BadValue,
    Parsed,
    parse_setting,
)

__all__ = [
    "BUILTIN",
    "NODE_LABEL_GPU_MEMORY",
    "UNMANAGED_BUILTIN",
    "CompiledPolicy",
    "CompiledRule",
    "Decision",
    "compile_modules",
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


@fast_init
@dataclass(frozen=True, slots=True)
class Decision:
    """One value a block sets.  For caps `behaviour` is clamp|deny; for admission value is the
    deny reason (str) or None for `allow`."""

    value: object
    text: str
    span: Span
    behaviour: str = ""


_UNCOMPILED: Predicate = lambda w: False  # noqa: E731 - a marker, never called


@fast_init
@dataclass(frozen=True, eq=False, slots=True)
class CompiledRule:
    name: str
    order: int
    weight: int
    match_text: str | None
    expr: ast.Expr | None  # the match expression (validated); None = matches every workload
    sets: Mapping[str, Decision]
    span: Span
    conjuncts: list[Conjunct] | None = field(default=None, repr=False)
    # How the evaluation index files the rule (see matching.index_keys); None = scanned.
    index: tuple[str, list[tuple[str | None, str]]] | None = field(default=None, repr=False)
    precedence: tuple[int, int] = (0, 0)  # (weight, order): higher wins
    # The expression as a closure, compiled at the first evaluation that needs it: the index
    # leaves a few dozen candidates of thousands of rules, so most are never compiled.
    _predicate: Predicate | None = field(default=_UNCOMPILED, init=False, repr=False)

    @property
    def predicate(self) -> Predicate | None:
        """The match as a function of a workload; None = matches every workload."""
        pred = self._predicate
        if pred is _UNCOMPILED:
            pred = compile_expr(self.expr) if self.expr is not None else None
            object.__setattr__(self, "_predicate", pred)  # idempotent: a race compiles twice
        return pred

    def matches(self, workload: Workload) -> bool:
        pred = self._predicate
        if pred is _UNCOMPILED:
            pred = self.predicate
        return pred is None or pred(workload)

    def canonical(self) -> dict[str, object]:
        return {
            "name": self.name,
            "weight": self.weight,
            "match": self.match_text,
            "sets": {k: [d.text, d.behaviour] for k, d in sorted(self.sets.items())},
        }


class CompiledPolicy:
    """An immutable, indexed rule set.  `evaluate` is pure and thread-safe."""

    def __init__(self, rules: Sequence[CompiledRule], defaults: Mapping[str, Decision],
                 unmanaged: Mapping[str, Decision], files: Sequence[str]) -> None:
        self.rules: tuple[CompiledRule, ...] = tuple(rules)
        self.defaults: Mapping[str, Decision] = MappingProxyType(dict(defaults))
        self.unmanaged_settings: Mapping[str, Decision] = MappingProxyType(dict(unmanaged))
        self.files: tuple[str, ...] = tuple(files)
        self._by_namespace: dict[str, list[CompiledRule]] = {}
        self._by_label: dict[tuple[str | None, str], list[CompiledRule]] = {}
        self._scan: list[CompiledRule] = []
        for rule in self.rules:
            keys = rule.index
            if keys is None:
                self._scan.append(rule)
            elif keys[0] == "namespace":
                for _, ns in keys[1]:
                    self._by_namespace.setdefault(ns, []).append(rule)
            else:
                for key, value in keys[1]:
                    self._by_label.setdefault((key, value), []).append(rule)
        # The digest is sha256 of canonical() as JSON with sorted keys; _sorted_canonical()
        # builds every mapping in key order already, so the encoder need not sort.
        self.digest: str = hashlib.sha256(
            json.dumps(self._sorted_canonical(), separators=(",", ":")).encode()
        ).hexdigest()
        self.unmanaged: EffectiveRule = self._unmanaged()

    # ---- identity

    def canonical(self) -> dict[str, object]:
        """The meaning of the policy, free of file names, positions, comments and layout."""
        return {
            "version": 1,
            "defaults": {k: d.text for k, d in sorted(self.defaults.items())},
            "unmanaged": {k: d.text for k, d in sorted(self.unmanaged_settings.items())},
            "rules": [r.canonical() for r in self.rules],
        }

    def _sorted_canonical(self) -> dict[str, object]:
        """canonical() with every mapping in sorted key order (what sort_keys would produce)."""
        return {
            "defaults": {k: d.text for k, d in sorted(self.defaults.items())},
            "rules": [{"match": r.match_text, "name": r.name,
                       "sets": {k: [d.text, d.behaviour] for k, d in sorted(r.sets.items())},
                       "weight": r.weight} for r in self.rules],
            "unmanaged": {k: d.text for k, d in sorted(self.unmanaged_settings.items())},
            "version": 1,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompiledPolicy) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return f"<CompiledPolicy {len(self.rules)} rules digest={self.digest[:12]}>"

    def index_stats(self) -> dict[str, int]:
        return {"rules": len(self.rules), "namespace_keys": len(self._by_namespace),
                "label_keys": len(self._by_label), "scanned": len(self._scan)}

    # ---- evaluation

    def candidates(self, workload: Workload) -> list[CompiledRule]:
        """Rules that may match (index hits plus the scan list), without duplicates."""
        found = list(self._scan)
        hit = self._by_namespace.get(workload.namespace)
        if hit:
            found.extend(hit)
        if self._by_label:
            by_label = self._by_label
            for item in workload.labels.items():
                hit = by_label.get(item)
                if hit:
                    found.extend(hit)
        return found

    def matching(self, workload: Workload) -> list[CompiledRule]:
        """Matching rules, highest precedence first."""
        out = {}
        for rule in self.candidates(workload):
            pred = rule._predicate
            if pred is _UNCOMPILED:
                pred = rule.predicate
            if pred is None or pred(workload):
                out[rule.order] = rule
        return sorted(out.values(), key=_by_precedence, reverse=True)

    def evaluate(self, workload: Workload) -> EffectiveRule:
        return _Evaluation(self, workload, self.matching(workload)).result()

    def _unmanaged(self) -> EffectiveRule:
        decided: dict[str, str] = {}
        reasons: dict[str, str] = {}

        def get(key: str) -> object:
            if key in self.unmanaged_settings:
                d = self.unmanaged_settings[key]
                decided[key], reasons[key] = "unmanaged", f"{d.text} from the unmanaged block"
                return d.value
            if key in UNMANAGED_BUILTIN:
                p = UNMANAGED_BUILTIN[key]
                decided[key], reasons[key] = "built-in", f"{p.text} (built-in for unmanaged)"
                return p.value
            if key in self.defaults:
                d = self.defaults[key]
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

    def to_json(self) -> dict[str, object]:
        return {"digest": self.digest, "files": list(self.files), **self.canonical()}


def _by_precedence(rule: CompiledRule) -> tuple[int, int]:
    return rule.precedence


class _Evaluation:
    """One workload against the matching rules; collects decided_by and reasons as it goes."""

    def __init__(self, policy: CompiledPolicy, workload: Workload,
                 matched: list[CompiledRule]) -> None:
        self.policy, self.workload, self.matched = policy, workload, matched
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
        d = self.policy.defaults.get(key)
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

    def cap(self, key: str, exceeds: bool, value_text: str) -> Decision | None:
        """Apply the winning cap on `key`; returns the cap when the value must be lowered."""
        hit = self.pick(f"cap.{key}")
        if not hit or not exceeds:
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
            exceeds = _exceeds(mem, cap, self.workload.node_labels.get(NODE_LABEL_GPU_MEMORY))
            if exceeds is None:
                # Units differ and the GPU size is unknown here: the cap travels with the rule
                # and memory_limit_bytes applies it on the node.
                rule = hit[0]
                if cap.kind == "mib":
                    cap_mib = cap.amount
                else:
                    cap_pct = cap.amount
                self.reasons["gpumem"] = (self.reasons.get("gpumem", "") +
                                          f'; at most {cap.describe()} (cap of rule "{rule.name}",'
                                          " applied on the node)")
            else:
                c = self.cap("gpumem", exceeds, mem.describe())
                if c is not None:
                    mem = cap
        if mem.kind == "mib":
            return mem.amount, None, cap_mib, cap_pct
        if mem.kind == "percent":
            return None, mem.amount, cap_mib, cap_pct
        return None, None, cap_mib, cap_pct


def _prio(p: int | None) -> str:
    return "high" if p == 0 else "low"


def _exceeds(mem: Memory, cap: Memory, gpu_mib_label: str | None) -> bool | None:
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


# ---- compilation


@dataclass
class _Ctx:
    lines: dict[str, list[str]]
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, code: str, span: Span, message: str, hint: str | None = None,
            severity: Severity = Severity.ERROR,
            related: tuple[tuple[Span, str], ...] = ()) -> None:
        src_lines = self.lines.get(span.file, [])
        src = src_lines[span.line - 1] if 0 < span.line <= len(src_lines) else ""
        self.diagnostics.append(Diagnostic(code, severity, span, message, hint, src, related))

    def bad(self, err: BadValue) -> None:
        self.add(err.code, err.span, err.message, err.hint)


def compile_modules(
    modules: Sequence[ast.Module],
) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    """Compile parsed files, in precedence order (later = higher), into one policy."""
    ctx = _Ctx({m.file: source_lines(m.text) for m in modules})
    rules: list[CompiledRule] = []
    defaults: dict[str, Decision] = {}
    unmanaged: dict[str, Decision] = {}
    seen_blocks: dict[str, Span] = {}
    names: dict[str, Span] = {}
    for module in modules:
        for item in module.items:
            if not isinstance(item, ast.Block):
                continue
            if item.kind in ("defaults", "unmanaged"):
                first = seen_blocks.get(item.kind)
                if first is not None:
                    ctx.add("GW013", item.keyword_span, f"a second `{item.kind}` block",
                            f"a policy set has at most one `{item.kind}` block; merge them",
                            related=((first, "the first one is here"),))
                    continue
                seen_blocks[item.kind] = item.keyword_span
                target = defaults if item.kind == "defaults" else unmanaged
                target.update(_settings_block(ctx, item))
                continue
            assert item.name is not None
            name = item.name.string
            if not name.strip():
                ctx.add("GW006", item.name.span, "rule name is empty", "give every rule a name")
            elif name in names:
                ctx.add("GW012", item.name.span, f'duplicate rule name "{name}"',
                        "rule names are unique across the policy set (explain and metrics "
                        "report them)", related=((names[name], "first defined here"),))
            else:
                names[name] = item.name.span
            rule = _rule(ctx, item, len(rules))
            if rule is not None:
                rules.append(rule)
    # Warnings are found among the rules that compiled cleanly, also when others have errors
    # (a run of `check` shows every problem at once).
    errors = [d for d in ctx.diagnostics if d.is_error]
    _analyse(ctx, [r for r in rules if not any(_within(e.span, r.span) for e in errors)])
    if any(d.is_error for d in ctx.diagnostics):
        return None, ctx.diagnostics
    return CompiledPolicy(rules, defaults, unmanaged, [m.file for m in modules]), ctx.diagnostics


def _within(inner: Span, outer: Span) -> bool:
    return (inner.file == outer.file
            and (outer.line, outer.col) <= (inner.line, inner.col)
            and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col))


def _settings_block(ctx: _Ctx, block: ast.Block) -> dict[str, Decision]:
    allowed = BLOCK_SETTINGS[block.kind]
    out: dict[str, Decision] = {}
    for stmt in block.stmts:
        if not isinstance(stmt, ast.Setting):
            word = _stmt_word(stmt)
            ctx.add("GW018", _stmt_keyword_span(stmt), f"`{word}` is not allowed in `{block.kind}`",
                    f"`{block.kind}` takes only `key = value` settings: " + ", ".join(allowed))
            continue
        d = _setting(ctx, block, stmt, allowed)
        if d is None:
            continue
        if stmt.key in out:
            ctx.add("GW014", stmt.key_span, f"`{stmt.key}` is set twice in `{block.kind}`",
                    related=((out[stmt.key].span, "first set here"),))
            continue
        out[stmt.key] = d
    return out


def _stmt_word(stmt: ast.Stmt) -> str:
    if isinstance(stmt, ast.Match):
        return "match"
    if isinstance(stmt, ast.Default):
        return "default"
    if isinstance(stmt, ast.Cap):
        return "cap"
    if isinstance(stmt, ast.Admission):
        return "allow" if stmt.allow else "deny"
    return stmt.key


def _stmt_keyword_span(stmt: ast.Stmt) -> Span:
    s = stmt.span
    return Span(s.file, s.line, s.col, s.line, s.col + len(_stmt_word(stmt)))


def _setting(ctx: _Ctx, block: ast.Block, stmt: ast.Setting,
             allowed: Sequence[str]) -> Decision | None:
    if stmt.key not in allowed:
        known = FIELD.get(stmt.key)
        if block.kind == "rule" and known is not None and known.default:
            value = " ".join(v.text for v in stmt.values)
            ctx.add("GW018", stmt.key_span, f"`{stmt.key}` cannot be set directly in a rule",
                    f"write `default {stmt.key} = {value}` (when the pod does not ask) or "
                    f"`cap {stmt.key} <= {value}` (an upper bound)")
            return None
        if known is not None:
            ctx.add("GW018", stmt.key_span, f"`{stmt.key}` is not allowed in `{block.kind}`",
                    "valid here: " + ", ".join(allowed))
            return None
        guess = closest(stmt.key, (*allowed, "match", "default", "cap", "deny", "allow")
                        if block.kind == "rule" else allowed)
        hint = (f"did you mean `{guess}`? " if guess else "") + "valid here: " + ", ".join(allowed)
        ctx.add("GW005", stmt.key_span, f"unknown setting `{stmt.key}` in `{block.kind}`", hint)
        return None
    try:
        parsed = parse_setting(block.kind, stmt.key, stmt.values, stmt.span)
    except BadValue as err:
        ctx.bad(err)
        return None
    return Decision(parsed.value, parsed.text, stmt.span)


def _rule(ctx: _Ctx, block: ast.Block, order: int) -> CompiledRule | None:
    assert block.name is not None
    name = block.name.string
    sets: dict[str, Decision] = {}
    match: ast.Match | None = None
    weight = 0
    weight_span: Span | None = None
    ok = True
    for stmt in block.stmts:
        if isinstance(stmt, ast.Setting):
            d = _setting(ctx, block, stmt, _RULE_SETTINGS)
            key = stmt.key
            if d is None:
                ok = False
            elif key == "weight":
                if weight_span is not None:
                    ctx.add("GW014", stmt.key_span,
                            f'`weight` is set twice in rule "{name}"',
                            related=((weight_span, "first set here"),))
                    ok = False
                weight, weight_span = to_int(d.value), stmt.span
            else:
                ok = _put(ctx, sets, name, key, d, stmt.key_span,
                          f"`{key}`") and ok
        elif isinstance(stmt, ast.Match):
            if match is not None:
                ctx.add("GW014", _stmt_keyword_span(stmt), f'rule "{name}" has two `match` lines',
                        "combine them with `and` / `or`", related=((match.span, "first here"),))
                ok = False
                continue
            match = stmt
            errs = validate_expr(stmt.expr, ctx.lines.get(stmt.span.file, []))
            if errs:
                ctx.diagnostics.extend(errs)
                ok = False
        elif isinstance(stmt, ast.Default):
            for a in stmt.assigns:
                if a.key not in DEFAULT_KEYS:
                    _unknown_key(ctx, a.key, a.key_span, "default", DEFAULT_KEYS)
                    ok = False
                    continue
                try:
                    p = parse_setting("rule", a.key, (a.value,), a.span)
                except BadValue as err:
                    ctx.bad(err)
                    ok = False
                    continue
                ok = _put(ctx, sets, name, _DEFAULT_SLOT[a.key], Decision(p.value, p.text, a.span),
                          a.key_span, f"`default {a.key}`") and ok
        elif isinstance(stmt, ast.Cap):
            behaviour = "clamp"
            if stmt.behaviour is not None:
                behaviour = stmt.behaviour.text
                if behaviour not in ("clamp", "deny"):
                    guess = closest(behaviour, ("clamp", "deny"))
                    ctx.add("GW006", stmt.behaviour.span,
                            f"unknown cap behaviour `{behaviour}`",
                            (f"did you mean `{guess}`? " if guess else "") +
                            "end a cap with `clamp` (lower the request) or `deny` (refuse it)")
                    ok = False
                    continue
            for c in stmt.items:
                if c.key not in CAP_KEYS:
                    _unknown_key(ctx, c.key, c.key_span, "cap", CAP_KEYS)
                    ok = False
                    continue
                try:
                    p = parse_setting("rule", c.key, (c.value,), c.span)
                except BadValue as err:
                    ctx.bad(err)
                    ok = False
                    continue
                ok = _put(ctx, sets, name, _CAP_SLOT[c.key],
                          Decision(p.value, p.text, c.span, behaviour), c.key_span,
                          f"`cap {c.key}`") and ok
        else:  # admission
            allow = stmt.allow
            reason = None if allow else (stmt.reason.string if stmt.reason else "")
            text = "allow" if allow else ("deny " + ast.quote(reason or ""))
            ok = _put(ctx, sets, name, "admission", Decision(reason, text, stmt.span),
                      _stmt_keyword_span(stmt), "admission (`deny` / `allow`)") and ok
    if not ok:
        return None
    if match is None:
        return CompiledRule(name, order, weight, None, None, MappingProxyType(sets), block.span,
                            [frozenset()], index_keys([frozenset()]), (weight, order))
    expr = match.expr
    conjuncts = dnf(expr)
    index = index_keys(conjuncts) if conjuncts is not None else None
    return CompiledRule(name, order, weight, format_expr(expr), expr, MappingProxyType(sets),
                        block.span, conjuncts, index, (weight, order))


_RULE_SETTINGS = BLOCK_SETTINGS["rule"]
_DEFAULT_SLOT = {k: f"default.{k}" for k in DEFAULT_KEYS}
_CAP_SLOT = {k: f"cap.{k}" for k in CAP_KEYS}


def _put(ctx: _Ctx, sets: dict[str, Decision], rule: str, slot: str, d: Decision, where: Span,
         what: str) -> bool:
    """Record what a rule sets; False (and GW014) when the slot is set already."""
    first = sets.get(slot)
    if first is not None:
        ctx.add("GW014", where, f'{what} is set twice in rule "{rule}"',
                related=((first.span, "first set here"),))
        return False
    sets[slot] = d
    return True


def _unknown_key(ctx: _Ctx, key: str, span: Span, stmt: str, valid: Sequence[str]) -> None:
    guess = closest(key, valid)
    hint = (f"did you mean `{guess}`? " if guess else "") + f"`{stmt}` takes " + ", ".join(valid)
    ctx.add("GW005", span, f"unknown field `{key}` in `{stmt}`", hint)


# ---- analysis: warnings that do not stop a policy from loading

MAX_SHADOW_CANDIDATES = 1000


def _analyse(ctx: _Ctx, rules: list[CompiledRule]) -> None:
    lives: list[list[Conjunct] | None] = []  # per rule: its satisfiable conjuncts
    for rule in rules:
        sets = rule.sets
        if not sets:
            ctx.add("GW105", _head(rule), f'rule "{rule.name}" decides nothing',
                    "add `default`, `cap`, `deny`, `priority`, `mode` or `on_violation`, or "
                    "delete the rule", Severity.WARNING)
        live = None
        if rule.conjuncts is not None:
            live = [c for c in rule.conjuncts if conjunct_satisfiable(c)]
            if not live:
                ctx.add("GW101", _head(rule), f'rule "{rule.name}" can never match',
                        "its match contradicts itself (e.g. one field equal to two values)",
                        Severity.WARNING)
        lives.append(live)
        for key, default_slot, cap_slot in _CAP_PAIRS:
            d = sets.get(default_slot)
            if d is None:
                continue
            c = sets.get(cap_slot)
            if c is not None and _default_above_cap(key, d.value, c.value):
                ctx.add("GW104", d.span, f"`default {key} = {d.text}` is above this rule's cap "
                        f"{c.text}", "the default will always be clamped; lower it",
                        Severity.WARNING, related=((c.span, "the cap"),))
    _shadowing(ctx, rules, lives)


_CAP_PAIRS = tuple((key, f"default.{key}", f"cap.{key}") for key in CAP_KEYS)


def _head(rule: CompiledRule) -> Span:
    """Where warnings about a whole rule point: its `rule` keyword."""
    s = rule.span
    return Span(s.file, s.line, s.col, s.line, s.col + 4)


def _default_above_cap(key: str, default: object, cap: object) -> bool:
    if isinstance(default, Memory) and isinstance(cap, Memory):
        return bool(_exceeds(default, cap, None))
    if key == "gpucores":
        low, high = to_int(default), to_int(cap)
        return high < 100 and (low == 0 or low > high)
    return to_int(default) > to_int(cap)


def _shadowing(ctx: _Ctx, rules: list[CompiledRule],
               lives: list[list[Conjunct] | None]) -> None:
    """GW102 for every rule whose every match is matched by one rule of higher precedence that
    sets at least the same fields.  Candidates come from the same buckets the evaluation index
    uses, so the check stays near-linear; a rule with more than MAX_SHADOW_CANDIDATES candidate
    shadowers (many unindexable rules) is not checked.  `lives`: per rule, its satisfiable
    conjuncts (None when its match is too large to analyse)."""
    by_ns: dict[str, list[CompiledRule]] = {}
    by_label: dict[tuple[str | None, str], list[CompiledRule]] = {}
    scan: list[CompiledRule] = []
    for r in rules:
        keys = r.index
        if keys is None:
            scan.append(r)
        elif keys[0] == "namespace":
            for _, value in keys[1]:
                by_ns.setdefault(value, []).append(r)
        else:
            for pair in keys[1]:
                by_label.setdefault(pair, []).append(r)
    scan.sort(key=_by_precedence)
    scan_prec = [r.precedence for r in scan]
    # The scan rules that set at least a given set of fields, by precedence (most rules share
    # a handful of such sets): a rule's unindexed candidates are then a slice, not a filter.
    by_fields: dict[frozenset[str], tuple[list[CompiledRule], list[tuple[int, int]]]] = {}
    for rule, live in zip(rules, lives, strict=True):
        if not live or not rule.sets:
            continue
        prec = rule.precedence
        n_scan = len(scan) - bisect.bisect_right(scan_prec, prec)
        indexed: dict[int, CompiledRule] = {}
        for name, key, value in pinned_values(live):
            hits = by_ns.get(value, ()) if name == "namespace" else by_label.get((key, value), ())
            for o in hits:
                if o.precedence > prec:
                    indexed[o.order] = o
        if not (n_scan or indexed) or n_scan + len(indexed) > MAX_SHADOW_CANDIDATES:
            continue
        mine = rule.sets.keys()
        above = [o for o in indexed.values() if mine <= o.sets.keys()]
        if n_scan:
            fields = frozenset(mine)
            group = by_fields.get(fields)
            if group is None:
                members = [o for o in scan if fields <= o.sets.keys()]
                group = by_fields[fields] = (members, [o.precedence for o in members])
            above.extend(group[0][bisect.bisect_right(group[1], prec):])
        if not above:
            continue
        for other in sorted(above, key=_by_precedence, reverse=True):
            assert other.conjuncts is not None
            if all(any(implies(c, oc) for oc in other.conjuncts) for c in live):
                ctx.add("GW102", _head(rule),
                        f'rule "{rule.name}" is fully shadowed by rule "{other.name}"',
                        f'every workload it matches also matches "{other.name}", which has '
                        "higher precedence (weight, then later position) and sets every field "
                        "it sets; reorder the rules or give this one a higher `weight`",
                        Severity.WARNING, related=((other.span, "the shadowing rule"),))
                break
