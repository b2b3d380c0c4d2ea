"""`fast_init` changes how frozen dataclasses are built, not what they are: same fields and
defaults, still frozen, equal and hashable as before; classes it cannot serve are refused."""

from __future__ import annotations

import dataclasses

import pytest

from policy import ast
from policy.compiler import CompiledRule, Decision
from policy.diagnostics import Span
from policy.fastinit import fast_init

S = Span("f.gwp", 1, 2, 1, 5)


def test_nodes_get_every_field_positional_or_keyword() -> None:
    v = ast.Value("string", '"a"', S)
    assert (v.kind, v.text, v.span) == ("string", '"a"', S)
    assert ast.Value(kind="string", span=S, text='"a"') == v
    assert hash(ast.Value("string", '"a"', S)) == hash(v)
    assert ast.Value("word", '"a"', S) != v


def test_defaults_and_init_false_fields_are_set() -> None:
    d = Decision(1, "1", S)
    assert d.behaviour == ""
    assert Decision(1, "1", S, "deny").behaviour == "deny"
    r = CompiledRule("r", 0, 0, None, None, {}, S)
    assert (r.conjuncts, r.index, r.precedence, r.predicate) == (None, None, (0, 0), None)


def test_still_frozen_and_argument_errors_still_raise() -> None:
    v = ast.Value("word", "x", S)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.text = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ast.Value("word", "x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ast.Value("word", "x", S, "extra")  # type: ignore[call-arg]


def test_classes_it_cannot_serve_are_refused() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    for cls in (Mutable, NoSlots, Factory):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
