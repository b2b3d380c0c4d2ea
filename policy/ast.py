"""The syntax tree of one policy file: immutable nodes that keep their source positions.

Nothing here is validated beyond the grammar: words are kept as written so that the compiler
can check them against the closed vocabularies and `fmt` can print them back.

Nodes are named tuples rather than frozen dataclasses: a 10,000-rule file has 160,000 of them,
and the parser builds a tuple (with `tuple.__new__`, no Python-level `__init__`) in less than
half the time.  Equality still includes the node's type (see `_typed_eq`); `Module`, one per
file, stays a dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from policy.diagnostics import Span

_T = TypeVar("_T")


def _typed_eq(cls: type[_T]) -> type[_T]:
    """Equality of nodes includes their type (plain tuples compare by content only, so
    `a and b` would equal `a or b`); hashing stays the tuple's."""

    def __eq__(self: tuple[Any, ...], other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self: tuple[Any, ...], other: object) -> bool:
        return not __eq__(self, other)

    cls.__eq__ = __eq__  # type: ignore[assignment,method-assign]  # this decorator's job
    cls.__ne__ = __ne__  # type: ignore[assignment,method-assign]  # ditto
    cls.__hash__ = tuple.__hash__  # type: ignore[assignment,method-assign]  # ditto
    return cls


__all__ = [
    "BOOLEAN_OPS",
    "Admission",
    "And",
    "Assign",
    "Block",
    "Cap",
    "CapItem",
    "Compare",
    "Default",
    "Expr",
    "Field",
    "Has",
    "In",
    "Include",
    "Item",
    "Match",
    "Module",
    "Not",
    "Or",
    "Setting",
    "Stmt",
    "Value",
    "Version",
]


@_typed_eq
class Value(NamedTuple):
    """One value word.  kind: quantity (`40GiB`, `10s`, `50%`), number, string, word."""

    kind: str
    text: str  # as written (strings: including the quotes)
    span: Span

    @property
    def string(self) -> str:
        """The value of a string literal, escapes resolved."""
        return unquote(self.text) if self.kind == "string" else self.text


def unquote(text: str) -> str:
    body = text[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def quote(value: str) -> str:
    """A string literal for `value` that `unquote` reads back unchanged."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


# ---- match expressions


@_typed_eq
class Field(NamedTuple):
    name: str  # namespace | name | container | node | label | annotation | node_label
    key: str | None  # for label / annotation / node_label
    key_quoted: bool
    span: Span
    name_span: Span


@_typed_eq
class Compare(NamedTuple):
    field: Field
    op: str  # == != =~ !~
    value: Value
    span: Span


@_typed_eq
class In(NamedTuple):
    field: Field
    values: tuple[Value, ...]
    negated: bool
    span: Span


@_typed_eq
class Has(NamedTuple):
    field: Field
    span: Span


@_typed_eq
class Not(NamedTuple):
    operand: Expr
    span: Span


@_typed_eq
class And(NamedTuple):
    items: tuple[Expr, ...]  # two or more, flattened
    span: Span


@_typed_eq
class Or(NamedTuple):
    items: tuple[Expr, ...]  # two or more, flattened
    span: Span


Expr = Compare | In | Has | Not | And | Or
# For isinstance in hot paths (a tuple is faster than building a union at each call).
BOOLEAN_OPS = (And, Or)


# ---- statements inside a block


@_typed_eq
class Match(NamedTuple):
    expr: Expr
    span: Span


@_typed_eq
class Assign(NamedTuple):
    key: str
    key_span: Span
    value: Value
    span: Span


@_typed_eq
class Default(NamedTuple):
    assigns: tuple[Assign, ...]
    span: Span


@_typed_eq
class CapItem(NamedTuple):
    key: str
    key_span: Span
    value: Value
    span: Span


@_typed_eq
class Cap(NamedTuple):
    items: tuple[CapItem, ...]
    behaviour: Value | None  # clamp | deny (word), None = clamp
    span: Span


@_typed_eq
class Admission(NamedTuple):
    """`deny ["reason"]` (allow=False) or `allow` (allow=True)."""

    allow: bool
    reason: Value | None
    span: Span


@_typed_eq
class Setting(NamedTuple):
    key: str
    key_span: Span
    values: tuple[Value, ...]
    span: Span


Stmt = Match | Default | Cap | Admission | Setting


# ---- top-level items


@_typed_eq
class Version(NamedTuple):
    number: Value
    span: Span


@_typed_eq
class Include(NamedTuple):
    path: Value
    span: Span


@_typed_eq
class Block(NamedTuple):
    kind: str  # defaults | unmanaged | rule
    name: Value | None  # the rule's name (string)
    stmts: tuple[Stmt, ...]
    span: Span  # from the keyword to the closing brace
    keyword_span: Span

    @property
    def title(self) -> str:
        return f'rule "{self.name.string}"' if self.kind == "rule" and self.name else self.kind


Item = Version | Include | Block


@dataclass(frozen=True, slots=True)
class Module:
    file: str
    text: str
    items: tuple[Item, ...]
