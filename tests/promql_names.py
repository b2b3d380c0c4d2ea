"""The metric names a PromQL expression reads (for tests that check dashboards and rules name
only series that exist): strings, label matchers, ranges and grouping clauses are removed;
what is left that is an identifier not called as a function and not a keyword is a metric."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = ["dashboard_exprs", "metric_names", "rule_exprs"]

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
             "unless", "bool", "offset", "inf", "nan"}
_CLAUSE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$")


def metric_names(expr: str) -> set[str]:
    m = _LABEL_VALUES.match(expr)  # a Grafana variable query: label_values(<selector>, label)
    if m:
        expr = m.group(1)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _CLAUSE.sub(" ", text)
    names = set()
    for tok in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", text):
        word = tok.group(0)
        after = text[tok.end():].lstrip()
        if word.lower() in _KEYWORDS or after.startswith("("):
            continue
        names.add(word)
    return names


def dashboard_exprs(path: Path) -> Iterator[str]:
    """Every query of a Grafana dashboard: panel targets and template variable queries."""
    doc = json.loads(path.read_text())

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                yield node["expr"]
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)

    yield from walk(doc.get("panels", []))
    for var in doc.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var.get("query")
            yield q["query"] if isinstance(q, dict) else str(q)


def rule_exprs(path: Path) -> tuple[set[str], list[str]]:
    """(the series a rule file records, every expression in it)."""
    groups = yaml.safe_load(path.read_text())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    return {r["record"] for r in rules if "record" in r}, [r["expr"] for r in rules]
