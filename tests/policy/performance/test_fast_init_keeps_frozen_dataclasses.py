"""`fast_init` changes how frozen dataclasses are built, not what they are: same fields and
defaults, still frozen, equal and hashable as before; classes it cannot serve are refused."""

from __future__ import annotations

import dataclasses

import pytest

from policy import ast
from policy.compiled import CompiledRule, Decision
from policy.diagnostics import Span
from policy.fastinit import fast_init

S = Span("f.gwp", 1, 2, 1, 5)


def test_every_field_is_set_positional_or_keyword() -> None:
    d = Decision(4, "4GiB", S, "deny")
    assert (d.value, d.text, d.span, d.behaviour) == (4, "4GiB", S, "deny")
    assert Decision(text="4GiB", value=4, behaviour="deny", span=S) == d
    assert hash(Decision(4, "4GiB", S, "deny")) == hash(d)
    assert Decision(4, "4GiB", S) != d


def test_defaults_and_init_false_fields_are_set() -> None:
    d = Decision(1, "1", S)
    assert d.behaviour == ""
    assert Decision(1, "1", S, "deny").behaviour == "deny"
    r = CompiledRule("r", 0, 0, None, None, {}, S)
    assert (r.conjuncts, r.index, r.precedence, r.predicate) == (None, None, (0, 0), None)


def test_still_frozen_and_argument_errors_still_raise() -> None:
    d = Decision(1, "1", S)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.text = "2"
    with pytest.raises(TypeError):
        Decision(1, "1")
    with pytest.raises(TypeError):
        Decision(1, "1", S, "deny", "extra")


def test_syntax_nodes_are_immutable_and_equal_only_to_their_own_kind() -> None:
    a, b = ast.Value("word", "x", S), ast.Value("word", "x", S)
    assert a == b and hash(a) == hash(b)
    assert not a != b  # noqa: SIM202 - __ne__ is defined apart from __eq__
    with pytest.raises(AttributeError):
        a.text = "y"
    both = (ast.Has(ast.Field("label", "a", False, S, S), S),) * 2
    assert ast.And(both, S) != ast.Or(both, S)  # same contents, different operators
    assert ast.Value("word", "x", S) != ("word", "x", S)


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
