"""`RuleIndex`: the rules filed by what their match pins, built once per compile.

A rule whose every conjunct pins the namespace (`namespace == "x"` / `in [...]`) is filed under
those namespaces; one whose every conjunct pins a label is filed under those (key, value) pairs
(see `matching.index_keys`); the rest are scanned on every evaluation.  Evaluation asks for a
workload's candidates; the shadowing analysis asks which rules sit in the buckets a rule's
pinned values name.  Both read the same index, which the compiler builds once and the
`CompiledPolicy` keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from policy.compiled import CompiledRule, by_precedence
from policy.model import Workload

__all__ = ["RuleIndex"]

_NONE: tuple[CompiledRule, ...] = ()


class RuleIndex:
    """Immutable after construction; reading it is thread-safe."""

    __slots__ = ("by_label", "by_namespace", "scan")

    def __init__(self, rules: Iterable[CompiledRule]) -> None:
        self.by_namespace: dict[str, list[CompiledRule]] = {}
        self.by_label: dict[tuple[str | None, str], list[CompiledRule]] = {}
        scan: list[CompiledRule] = []
        for rule in rules:
            keys = rule.index
            if keys is None:
                scan.append(rule)
            elif keys[0] == "namespace":
                for _, ns in keys[1]:
                    self.by_namespace.setdefault(ns, []).append(rule)
            else:
                for pair in keys[1]:
                    self.by_label.setdefault(pair, []).append(rule)
        # The rules no bucket holds, lowest precedence first (the analysis takes a slice of
        # those above a rule by bisection).
        scan.sort(key=by_precedence)
        self.scan: tuple[CompiledRule, ...] = tuple(scan)

    def candidates(self, workload: Workload) -> list[CompiledRule]:
        """Rules that may match: the workload's namespace and label buckets and the scanned
        rules (a rule filed under two of its labels may appear twice)."""
        found = list(self.scan)
        hit = self.by_namespace.get(workload.namespace)
        if hit:
            found.extend(hit)
        by_label = self.by_label
        if by_label:
            for item in workload.labels.items():
                hit = by_label.get(item)
                if hit:
                    found.extend(hit)
        return found

    def bucket(self, field: str, key: str | None, value: str) -> Sequence[CompiledRule]:
        """The rules filed under a namespace (`field` "namespace", key None) or a label."""
        if field == "namespace":
            return self.by_namespace.get(value, _NONE)
        return self.by_label.get((key, value), _NONE)

    def stats(self) -> dict[str, int]:
        return {"namespace_keys": len(self.by_namespace), "label_keys": len(self.by_label),
                "scanned": len(self.scan)}
