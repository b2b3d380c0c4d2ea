"""Syntax trees -> `CompiledPolicy`: validation, the rules' decisions and precedence, the rule
index (built here, once), the digest.

Each rule becomes a `CompiledRule` (policy.compiled); `policy.analysis` warns about the rules
that compiled cleanly; `policy.evaluate` answers for a workload.  Errors and warnings are
collected as diagnostics, never raised.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policy import ast
from policy.analysis import analyse
from policy.compiled import CompiledRule, Decision
from policy.diagnostics import Diagnostic, Severity, Span, closest, line_at, source_lines
from policy.evaluate import evaluate_rules, matching, unmanaged_rule
from policy.index import RuleIndex
from policy.matching import dnf, index_keys, validate_expr
from policy.model import EffectiveRule, Workload
from policy.printer import format_expr
from policy.units import to_int
from policy.vocabulary import (
    BLOCK_SETTINGS,
    CAP_KEYS,
    DEFAULT_KEYS,
    FIELD,
    BadValue,
    parse_setting,
)

__all__ = ["CompiledPolicy", "compile_modules"]


class CompiledPolicy:
    """An immutable, indexed rule set.  `evaluate` is pure and thread-safe.

    `index` files exactly `rules` (compile_modules passes the one its analysis used); when
    None, it is built here."""

    def __init__(self, rules: Sequence[CompiledRule], defaults: Mapping[str, Decision],
                 unmanaged: Mapping[str, Decision], files: Sequence[str],
                 index: RuleIndex | None = None) -> None:
        self.rules: tuple[CompiledRule, ...] = tuple(rules)
        self.defaults: Mapping[str, Decision] = MappingProxyType(dict(defaults))
        self.unmanaged_settings: Mapping[str, Decision] = MappingProxyType(dict(unmanaged))
        self.files: tuple[str, ...] = tuple(files)
        self.index: RuleIndex = index if index is not None else RuleIndex(self.rules)
        # The digest is sha256 of canonical() as JSON with sorted keys; _sorted_canonical()
        # builds every mapping in key order already, so the encoder need not sort.
        self.digest: str = hashlib.sha256(
            json.dumps(self._sorted_canonical(), separators=(",", ":")).encode()
        ).hexdigest()
        self.unmanaged: EffectiveRule = unmanaged_rule(self.defaults, self.unmanaged_settings)

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

    def to_json(self) -> dict[str, object]:
        return {"digest": self.digest, "files": list(self.files), **self.canonical()}

    def index_stats(self) -> dict[str, int]:
        return {"rules": len(self.rules), **self.index.stats()}

    # ---- evaluation (policy.evaluate)

    def candidates(self, workload: Workload) -> list[CompiledRule]:
        """Rules that may match (index hits plus the scanned rules)."""
        return self.index.candidates(workload)

    def matching(self, workload: Workload) -> list[CompiledRule]:
        """Matching rules, highest precedence first."""
        return matching(self.index, workload)

    def evaluate(self, workload: Workload) -> EffectiveRule:
        return evaluate_rules(self.defaults, workload, matching(self.index, workload))


@dataclass
class _Ctx:
    lines: dict[str, list[str]]
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, code: str, span: Span, message: str, hint: str | None = None,
            severity: Severity = Severity.ERROR,
            related: tuple[tuple[Span, str], ...] = ()) -> None:
        src = line_at(self.lines.get(span.file, []), span.line)
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
    clean = [r for r in rules if not any(_within(e.span, r.span) for e in errors)] if errors \
        else rules
    index = RuleIndex(clean)  # built once: the analysis reads it, the policy keeps it
    ctx.diagnostics.extend(analyse(clean, index, ctx.lines))
    if errors:
        return None, ctx.diagnostics
    files = [m.file for m in modules]
    return CompiledPolicy(rules, defaults, unmanaged, files, index), ctx.diagnostics


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
