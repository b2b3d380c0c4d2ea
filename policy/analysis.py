"""Analysis: warnings about compiled rules that do not stop a policy from loading.

GW105 a rule decides nothing; GW101 its match contradicts itself; GW104 its default is above
its own cap; GW102 every workload it matches is matched by one rule of higher precedence that
sets at least the same fields.  The shadowing check finds its candidates in the same
`RuleIndex` that evaluation uses, so it stays near-linear in the number of rules.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from policy.compiled import CompiledRule, by_precedence
from policy.diagnostics import Diagnostic, Severity, Span, line_at
from policy.evaluate import exceeds
from policy.index import RuleIndex
from policy.matching import Conjunct, conjunct_satisfiable, implies, pinned_values
from policy.units import Memory, to_int
from policy.vocabulary import CAP_KEYS

__all__ = ["MAX_SHADOW_CANDIDATES", "analyse"]

# A rule with more candidate shadowers than this (many unindexable rules) is not checked.
MAX_SHADOW_CANDIDATES = 1000

_CAP_PAIRS = tuple((key, f"default.{key}", f"cap.{key}") for key in CAP_KEYS)


class _Warnings:
    def __init__(self, lines: Mapping[str, Sequence[str]]) -> None:
        self.lines = lines
        self.found: list[Diagnostic] = []

    def add(self, code: str, span: Span, message: str, hint: str,
            related: tuple[tuple[Span, str], ...] = ()) -> None:
        src = line_at(self.lines.get(span.file, ()), span.line)
        self.found.append(Diagnostic(code, Severity.WARNING, span, message, hint, src, related))


def analyse(rules: Sequence[CompiledRule], index: RuleIndex,
            lines: Mapping[str, Sequence[str]]) -> list[Diagnostic]:
    """Warnings about `rules` (in source order; `index` files exactly these rules); `lines`:
    each file's source lines, for the snippets."""
    out = _Warnings(lines)
    lives: list[list[Conjunct] | None] = []  # per rule: its satisfiable conjuncts
    for rule in rules:
        sets = rule.sets
        if not sets:
            out.add("GW105", _head(rule), f'rule "{rule.name}" decides nothing',
                    "add `default`, `cap`, `deny`, `priority`, `mode` or `on_violation`, or "
                    "delete the rule")
        live = None
        if rule.conjuncts is not None:
            live = [c for c in rule.conjuncts if conjunct_satisfiable(c)]
            if not live:
                out.add("GW101", _head(rule), f'rule "{rule.name}" can never match',
                        "its match contradicts itself (e.g. one field equal to two values)")
        lives.append(live)
        for key, default_slot, cap_slot in _CAP_PAIRS:
            d = sets.get(default_slot)
            if d is None:
                continue
            c = sets.get(cap_slot)
            if c is not None and _default_above_cap(key, d.value, c.value):
                out.add("GW104", d.span, f"`default {key} = {d.text}` is above this rule's cap "
                        f"{c.text}", "the default will always be clamped; lower it",
                        related=((c.span, "the cap"),))
    _shadowing(out, rules, lives, index)
    return out.found


def _head(rule: CompiledRule) -> Span:
    """Where warnings about a whole rule point: its `rule` keyword."""
    s = rule.span
    return Span(s.file, s.line, s.col, s.line, s.col + 4)


def _default_above_cap(key: str, default: object, cap: object) -> bool:
    if isinstance(default, Memory) and isinstance(cap, Memory):
        return bool(exceeds(default, cap, None))
    if key == "gpucores":
        low, high = to_int(default), to_int(cap)
        return high < 100 and (low == 0 or low > high)
    return to_int(default) > to_int(cap)


def _shadowing(out: _Warnings, rules: Sequence[CompiledRule],
               lives: list[list[Conjunct] | None], index: RuleIndex) -> None:
    """GW102 for every rule whose every match is matched by one rule of higher precedence that
    sets at least the same fields.  Candidates: the rules in the index buckets of the values
    the rule pins, and the scanned rules.  `lives`: per rule, its satisfiable conjuncts (None
    when its match is too large to analyse)."""
    scan = index.scan  # lowest precedence first
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
            for o in index.bucket(name, key, value):
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
        for other in sorted(above, key=by_precedence, reverse=True):
            assert other.conjuncts is not None
            if all(any(implies(c, oc) for oc in other.conjuncts) for c in live):
                out.add("GW102", _head(rule),
                        f'rule "{rule.name}" is fully shadowed by rule "{other.name}"',
                        f'every workload it matches also matches "{other.name}", which has '
                        "higher precedence (weight, then later position) and sets every field "
                        "it sets; reorder the rules or give this one a higher `weight`",
                        related=((other.span, "the shadowing rule"),))
                break
