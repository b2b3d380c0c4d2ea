"""Warnings: rules that can never match, rules fully shadowed, defaults above caps, rules that
decide nothing.  Warnings do not stop a policy from loading, and sound rules get none."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from policy import LoadResult

V = "version 1\n"


def rule(name: str, body: str) -> str:
    return f'rule "{name}" {{\n{body}\n}}\n'


@pytest.mark.parametrize("match", [
    'namespace == "a" and namespace == "b"',
    'namespace == "a" and namespace != "a"',
    'label t in ["a", "b"] and label t == "c"',
    'label t == "a" and not has label t',
    'namespace == "abc" and namespace =~ "x.*"',
    'namespace =~ "x.*" and namespace !~ "x.*"',
    'label t in []',
    '(namespace == "a" or namespace == "b") and namespace == "c"',
    'not (has label t or not has label t)',
])
def test_never_matching(load: Callable[..., LoadResult], match: str) -> None:
    result = load(V + rule("r", f"  match {match}\n  mode = audit"))
    assert result.ok
    assert [d.code for d in result.diagnostics] == ["GW101"]


@pytest.mark.parametrize("match", [
    'namespace == "a" or namespace == "b"',
    'label t != "a" and not has label t',
    'namespace =~ "x.*" and namespace == "xy"',
    'label t in ["a", "b"] and label t != "a"',
])
def test_satisfiable_is_not_flagged(load: Callable[..., LoadResult], match: str) -> None:
    assert load(V + rule("r", f"  match {match}\n  mode = audit")).diagnostics == []


@pytest.mark.parametrize("early, late", [
    ('  match namespace == "a"\n  mode = audit', "  mode = enforce"),
    ('  match namespace == "a" and label t == "x"\n  mode = audit',
     '  match namespace in ["a", "b"]\n  mode = enforce'),
    ('  match label t == "x"\n  mode = audit', '  match has label t\n  mode = enforce'),
    ('  match namespace == "ab"\n  mode = audit', '  match namespace =~ "a.*"\n  mode = enforce'),
])
def test_fully_shadowed(load: Callable[..., LoadResult], early: str, late: str) -> None:
    result = load(V + rule("early", early) + rule("late", late))
    assert [d.code for d in result.diagnostics] == ["GW102"]
    assert 'shadowed by rule "late"' in result.diagnostics[0].message


@pytest.mark.parametrize("early, late", [
    # the later rule sets less than the earlier one: not fully shadowed
    ('  match namespace == "a"\n  mode = audit\n  priority = high', "  mode = enforce"),
    # the later rule matches less
    ("  mode = audit", '  match namespace == "a"\n  mode = enforce'),
    # the earlier rule has more weight
    ('  weight = 1\n  match namespace == "a"\n  mode = audit', "  mode = enforce"),
])
def test_not_shadowed(load: Callable[..., LoadResult], early: str, late: str) -> None:
    assert load(V + rule("early", early) + rule("late", late)).diagnostics == []


def test_default_above_own_cap(load: Callable[..., LoadResult]) -> None:
    result = load(V + rule("r", "  default gpucores = 0%\n  cap gpucores <= 50%"))
    assert [d.code for d in result.diagnostics] == ["GW104"]


def test_rule_that_decides_nothing(load: Callable[..., LoadResult]) -> None:
    assert [d.code for d in load(V + rule("r", '  match name == "x"')).diagnostics] == ["GW105"]
