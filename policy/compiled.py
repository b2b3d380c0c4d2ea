"""What compiling yields per rule: `Decision` (one value a block sets) and `CompiledRule` (a
rule's name, precedence, match and decisions).

Data only: `policy.compiler` builds them, `policy.index` files them, `policy.evaluate` and
`policy.analysis` read them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from policy import ast
from policy.diagnostics import Span
from policy.fastinit import fast_init
from policy.matching import Conjunct, Predicate, compile_expr
from policy.model import Workload

__all__ = ["UNCOMPILED", "CompiledRule", "Decision", "IndexKeys", "by_precedence"]


@fast_init
@dataclass(frozen=True, slots=True)
class Decision:
    """One value a block sets.  For caps `behaviour` is clamp|deny; for admission value is the
    deny reason (str) or None for `allow`."""

    value: object
    text: str
    span: Span
    behaviour: str = ""


# A rule's predicate before its first use (a marker, never called).
UNCOMPILED: Predicate = lambda w: False  # noqa: E731

# How the rule index files a rule (see matching.index_keys): ("namespace" | "label", the
# (label key, value) pairs; the key is None for a namespace).
IndexKeys = tuple[str, list[tuple[str | None, str]]]


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
    # How the rule index files the rule; None = scanned on every evaluation.
    index: IndexKeys | None = field(default=None, repr=False)
    precedence: tuple[int, int] = (0, 0)  # (weight, order): higher wins
    # The expression as a closure, compiled at the first evaluation that needs it: the index
    # leaves a few dozen candidates of thousands of rules, so most are never compiled.
    _predicate: Predicate | None = field(default=UNCOMPILED, init=False, repr=False)

    @property
    def predicate(self) -> Predicate | None:
        """The match as a function of a workload; None = matches every workload."""
        pred = self._predicate
        if pred is UNCOMPILED:
            pred = compile_expr(self.expr) if self.expr is not None else None
            object.__setattr__(self, "_predicate", pred)  # idempotent: a race compiles twice
        return pred

    def matches(self, workload: Workload) -> bool:
        pred = self._predicate
        if pred is UNCOMPILED:
            pred = self.predicate
        return pred is None or pred(workload)

    def canonical(self) -> dict[str, object]:
        return {
            "name": self.name,
            "weight": self.weight,
            "match": self.match_text,
            "sets": {k: [d.text, d.behaviour] for k, d in sorted(self.sets.items())},
        }


# The sort key of precedence (weight, then source order); a C-level getter, as it runs on every
# evaluation.
by_precedence: Callable[[CompiledRule], tuple[int, int]] = operator.attrgetter("precedence")
