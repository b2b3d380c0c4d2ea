"""Match expressions: validation, compilation to predicates, and static analysis.

Semantics (Kubernetes label-selector style): for a label / annotation / node_label that the
workload does not have, `==`, `=~` and `in` are false, while `!=`, `!~` and `not in` are true;
`has` tests presence.  Regexes must match the whole value (`re.fullmatch`).
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from policy import ast
from policy.diagnostics import Diagnostic, Severity, Span, closest, line_at
from policy.model import Workload

__all__ = [
    "KEYED_FIELDS",
    "PLAIN_FIELDS",
    "Conjunct",
    "Literal",
    "Predicate",
    "compile_expr",
    "conjunct_satisfiable",
    "dnf",
    "implies",
    "index_keys",
    "pinned_values",
    "validate_expr",
]

PLAIN_FIELDS = ("namespace", "name", "container", "node")
KEYED_FIELDS = ("label", "annotation", "node_label")
MAX_DNF = 64

Predicate = Callable[[Workload], bool]


# ---- validation


def validate_expr(expr: ast.Expr, lines: list[str]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    stack: list[ast.Expr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (ast.And, ast.Or)):
            stack.extend(e.items)
        elif isinstance(e, ast.Not):
            stack.append(e.operand)
        else:
            field = e.field
            has = isinstance(e, ast.Has)
            if has or not _field_ok(field):
                out.extend(_check_field(field, has, lines))
            if isinstance(e, ast.Compare) and e.op in ("=~", "!~"):
                out.extend(_check_regex(e.value, lines))
    if out:
        out.sort(key=lambda d: (d.span.line, d.span.col))
    return out


def _field_ok(field: ast.Field) -> bool:
    """Whether a compared field is valid, decided without building diagnostics."""
    if field.key is None:
        return field.name in PLAIN_FIELDS
    return field.name in KEYED_FIELDS and field.key != ""


def _err(code: str, span: Span, msg: str, lines: list[str], hint: str | None = None) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, span, msg, hint, line_at(lines, span.line))


def _check_field(field: ast.Field, is_has: bool, lines: list[str]) -> list[Diagnostic]:
    name = field.name
    if name in PLAIN_FIELDS:
        if is_has:
            return [_err("GW011", field.span, f"`has` needs a keyed field, not `{name}`", lines,
                         "write `has label KEY`, `has annotation KEY` or `has node_label KEY`")]
        if field.key is not None:
            return [_err("GW011", field.span, f"`{name}` takes no key", lines,
                         f"compare it directly: `{name} == \"value\"`")]
        return []
    if name in KEYED_FIELDS:
        if field.key is None:
            return [_err("GW011", field.span, f"`{name}` needs a key", lines,
                         f'write `{name} KEY` or `{name} "example.com/key"`')]
        if field.key == "":
            return [_err("GW011", field.span, f"`{name}` key is empty", lines)]
        return []
    guess = closest(name, (*PLAIN_FIELDS, *KEYED_FIELDS, "labels", "annotations"))
    guess = {"labels": "label", "annotations": "annotation"}.get(guess or "", guess)
    valid = ", ".join((*PLAIN_FIELDS, *KEYED_FIELDS))
    hint = f"did you mean `{guess}`? " if guess else ""
    return [_err("GW010", field.name_span, f"unknown match field `{name}`", lines,
                 f"{hint}valid fields: {valid}")]


def _check_regex(value: ast.Value, lines: list[str]) -> list[Diagnostic]:
    try:
        re.compile(value.string)
    except (OverflowError, RecursionError) as err:  # `a{99999999999}`, thousands of `(`
        return [_err("GW009", value.span, f"invalid regular expression: {err}", lines,
                     "regexes use Python `re` syntax and must match the whole value")]
    except re.error as err:
        col = value.span.col + 1 + (err.pos or 0)
        span = Span(value.span.file, value.span.line, min(col, value.span.end_col - 1),
                    value.span.line, min(col, value.span.end_col - 1) + 1)
        return [_err("GW009", span, f"invalid regular expression: {err.msg}", lines,
                     "regexes use Python `re` syntax and must match the whole value")]
    return []


# ---- compilation (only called on validated expressions)
#
# Evaluation speed matters (the agent evaluates every workload on every policy reload and the
# index still leaves a few rules to test), so each leaf is one specialised closure that reads
# the workload directly, and small and/or nodes call their operands without a generator.

_KEYED_ATTR = {"label": "labels", "annotation": "annotations", "node_label": "node_labels"}


def _leaf(field: ast.Field, test: Callable[[str | None], bool]) -> Predicate:
    """A predicate applying `test` to the field's value (None when a keyed field is absent)."""
    key = field.key
    if field.name == "namespace":
        return lambda w: test(w.namespace)
    if field.name == "name":
        return lambda w: test(w.name)
    if field.name == "container":
        return lambda w: test(w.container)
    if field.name == "node":
        return lambda w: test(w.node)
    assert key is not None  # a keyed field: validate_expr rejected one without its key
    if field.name == "label":
        return lambda w: test(w.labels.get(key))
    if field.name == "annotation":
        return lambda w: test(w.annotations.get(key))
    return lambda w: test(w.node_labels.get(key))


def _equality(field: ast.Field, target: str, negated: bool) -> Predicate:
    """`==` / `!=` without an intermediate test function (the most common leaf)."""
    key = field.key
    name = field.name
    if name in PLAIN_FIELDS:
        get = operator.attrgetter(name)
        if negated:
            return lambda w: get(w) != target
        return lambda w: get(w) == target
    attr = _KEYED_ATTR[name]
    assert key is not None  # a keyed field: validate_expr rejected one without its key
    if negated:
        return lambda w: getattr(w, attr).get(key) != target
    if name == "label":
        return lambda w: w.labels.get(key) == target
    return lambda w: getattr(w, attr).get(key) == target


def compile_expr(expr: ast.Expr) -> Predicate:
    if isinstance(expr, ast.BOOLEAN_OPS):
        parts = tuple(compile_expr(e) for e in expr.items)
        if isinstance(expr, ast.And):
            if len(parts) == 2:
                a, b = parts
                return lambda w: a(w) and b(w)
            if len(parts) == 3:
                a, b, c = parts
                return lambda w: a(w) and b(w) and c(w)
            return lambda w: all(p(w) for p in parts)
        if len(parts) == 2:
            a, b = parts
            return lambda w: a(w) or b(w)
        return lambda w: any(p(w) for p in parts)
    if isinstance(expr, ast.Not):
        inner = compile_expr(expr.operand)
        return lambda w: not inner(w)
    field = expr.field
    if isinstance(expr, ast.Has):
        key = field.key
        attr = _KEYED_ATTR[field.name]
        return lambda w: key in getattr(w, attr)
    if isinstance(expr, ast.In):
        values = frozenset(v.string for v in expr.values)
        if expr.negated:
            return _leaf(field, lambda v: v not in values)
        return _leaf(field, lambda v: v in values)
    target = expr.value.string
    if expr.op in ("==", "!="):
        return _equality(field, target, expr.op == "!=")
    match = re.compile(target).fullmatch
    if expr.op == "=~":
        return _leaf(field, lambda v: v is not None and match(v) is not None)
    return _leaf(field, lambda v: v is None or match(v) is None)


# ---- static analysis over disjunctive normal form

FieldId = tuple[str, str | None]


class Literal(NamedTuple):
    """One atom in negation normal form.  op: eq ne re nre in notin has nothas.  A named tuple:
    conjuncts are sets of literals, hashed and compared thousands of times per policy."""

    field: FieldId
    op: str
    values: frozenset[str]  # eq/ne/re/nre: one value; in/notin: the set

    @property
    def value(self) -> str:
        return next(iter(self.values))


Conjunct = frozenset[Literal]

_NEGATE = {"eq": "ne", "ne": "eq", "re": "nre", "nre": "re", "in": "notin", "notin": "in",
           "has": "nothas", "nothas": "has"}
_NO_VALUES: frozenset[str] = frozenset()
_OPS = {"==": "eq", "!=": "ne", "=~": "re", "!~": "nre"}


def _literal(expr: ast.Compare | ast.In | ast.Has, negate: bool) -> Literal:
    field = expr.field
    if isinstance(expr, ast.Compare):
        op, values = _OPS[expr.op], frozenset((expr.value.string,))
    elif isinstance(expr, ast.In):
        op = "notin" if expr.negated else "in"
        values = frozenset([v.string for v in expr.values])
    else:
        op, values = "has", _NO_VALUES
    return _new_tuple(Literal, ((field.name, field.key), _NEGATE[op] if negate else op, values))


_new_tuple = tuple.__new__  # a Literal without the named tuple's Python-level __new__
_LEAF_TYPES = (ast.Compare, ast.In, ast.Has)


def dnf(expr: ast.Expr | None, negate: bool = False) -> list[Conjunct] | None:
    """The expression as a list of conjunctions (None when larger than MAX_DNF)."""
    if expr is None:
        return [frozenset()]
    if isinstance(expr, ast.Not):
        return dnf(expr.operand, not negate)
    if isinstance(expr, ast.And) and not negate:
        items = expr.items
        leaves = [e for e in items if isinstance(e, _LEAF_TYPES)]
        if len(leaves) == len(items):
            return [frozenset([_literal(e, False) for e in leaves])]  # the common case
    if isinstance(expr, (ast.And, ast.Or)):
        parts = [dnf(e, negate) for e in expr.items]
        known = [p for p in parts if p is not None]
        if len(known) < len(parts):
            return None
        conj = isinstance(expr, ast.And) != negate  # De Morgan
        if not conj:
            out = [c for p in known for c in p]
            return out if len(out) <= MAX_DNF else None
        result: list[Conjunct] = [frozenset()]
        for p in known:
            result = [a | b for a, b in itertools.product(result, p)]
            if len(result) > MAX_DNF:
                return None
        return result
    return [frozenset({_literal(expr, negate)})]


@dataclass(slots=True)
class _FieldFacts:
    present: bool | None = None  # True required, False required absent, None unknown
    candidates: frozenset[str] | None = None  # finite set of possible values
    excluded: set[str] | None = None
    regexes: list[str] | None = None
    not_regexes: list[str] | None = None


@functools.lru_cache(maxsize=1 << 16)
def _facts(conj: Conjunct) -> dict[FieldId, _FieldFacts] | None:
    """Per field, what the conjunct requires; None when it is contradictory.  Cached: callers
    must not modify the result."""
    facts: dict[FieldId, _FieldFacts] = {}
    for lit in conj:
        fid, op, values = lit
        f = facts.get(fid)
        if f is None:
            f = facts[fid] = _FieldFacts()
        if fid[0] in PLAIN_FIELDS:
            f.present = True
        if op in ("eq", "in", "re", "has"):
            if f.present is False:
                return None
            f.present = True
        if op == "nothas":
            if f.present is True:
                return None
            f.present = False
        if op in ("eq", "in"):
            f.candidates = values if f.candidates is None else f.candidates & values
        elif op in ("ne", "notin"):
            f.excluded = (f.excluded or set()) | set(values)
        elif op == "re":
            f.regexes = [*(f.regexes or []), lit.value]
        elif op == "nre":
            f.not_regexes = [*(f.not_regexes or []), lit.value]
    for f in facts.values():
        if f.regexes and f.not_regexes and set(f.regexes) & set(f.not_regexes):
            return None
        if f.candidates is not None:
            if f.excluded or f.regexes or f.not_regexes:  # else every candidate is allowed
                f.candidates = frozenset(v for v in f.candidates if _allowed(f, v))
            if not f.candidates:
                return None
    return facts


def _allowed(f: _FieldFacts, v: str) -> bool:
    if f.excluded and v in f.excluded:
        return False
    if f.regexes and not all(re.fullmatch(r, v) for r in f.regexes):
        return False
    return not (f.not_regexes and any(re.fullmatch(r, v) for r in f.not_regexes))


def conjunct_satisfiable(conj: Conjunct) -> bool:
    return _facts(conj) is not None


def implies(conj: Conjunct, target: Conjunct) -> bool:
    """Whether every workload satisfying `conj` satisfies `target` (sound, not complete)."""
    facts = _facts(conj)
    if facts is None:
        return True
    return all(_implies_literal(conj, facts.get(lit.field), lit) for lit in target)


def _implies_literal(conj: Conjunct, f: _FieldFacts | None, lit: Literal) -> bool:
    if lit in conj:
        return True
    if f is None:
        return False
    cands = f.candidates
    op = lit.op
    if op == "has":
        return f.present is True
    if op == "nothas":
        return f.present is False
    if f.present is False:
        return op in ("ne", "notin", "nre")
    if cands is None:
        return op in ("ne", "notin") and bool(f.excluded) and lit.values <= (f.excluded or set())
    if op == "eq":
        return cands == lit.values
    if op == "in":
        return cands <= lit.values
    if op in ("ne", "notin"):
        return not (cands & lit.values)
    if op == "re":
        return all(re.fullmatch(lit.value, v) for v in cands)
    return not any(re.fullmatch(lit.value, v) for v in cands)


def pinned_values(conjuncts: list[Conjunct]) -> set[tuple[str, str | None, str]]:
    """(field, key, value) for every value a satisfiable conjunct pins a namespace or a label
    to (an `==` or `in`): the index buckets a rule implied by these conjuncts could sit in."""
    out: set[tuple[str, str | None, str]] = set()
    for c in conjuncts:
        facts = _facts(c)
        if facts is None:
            continue
        for (name, key), f in facts.items():
            if name in ("namespace", "label") and f.candidates is not None:
                out.update((name, key, v) for v in f.candidates)
    return out


def index_keys(conjuncts: list[Conjunct]) -> tuple[str, list[tuple[str | None, str]]] | None:
    """How a rule can be indexed: ("namespace", [(None, ns)...]) or ("label", [(key, v)...]).

    A rule is indexable under a field when every satisfiable conjunct pins that field to a
    finite set of values; otherwise it goes to the scan list (None).
    """
    live = [(c, found) for c in conjuncts if (found := _facts(c)) is not None]
    if not live:
        return None
    ns: list[tuple[str | None, str]] = []
    for _, facts in live:
        f = facts.get(("namespace", None))
        if f is None or f.candidates is None:
            break
        ns.extend((None, v) for v in sorted(f.candidates))
    else:
        return "namespace", ns
    labels: list[tuple[str | None, str]] = []
    for _, facts in live:
        best: tuple[str | None, frozenset[str]] | None = None
        for (name, key), f in sorted(facts.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            if name == "label" and f.candidates is not None and (
                best is None or len(f.candidates) < len(best[1])
            ):
                best = (key, f.candidates)
        if best is None:
            return None
        labels.extend((best[0], v) for v in sorted(best[1]))
    return "label", labels


