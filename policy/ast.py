"""The syntax tree of one policy file: frozen dataclasses that keep their source positions.

Nothing here is validated beyond the grammar: words are kept as written so that the compiler
can check them against the closed vocabularies and `fmt` can print them back.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.diagnostics import Span
from policy.fastinit import fast_init

__all__ = [
    "BOOLEAN_OPS",
    "LEAVES",
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


@fast_init
@dataclass(frozen=True, slots=True)
class Value:
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


@fast_init
@dataclass(frozen=True, slots=True)
class Field:
    name: str  # namespace | name | container | node | label | annotation | node_label
    key: str | None  # for label / annotation / node_label
    key_quoted: bool
    span: Span
    name_span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Compare:
    field: Field
    op: str  # == != =~ !~
    value: Value
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class In:
    field: Field
    values: tuple[Value, ...]
    negated: bool
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Has:
    field: Field
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Expr, ...]  # two or more, flattened
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Expr, ...]  # two or more, flattened
    span: Span


Expr = Compare | In | Has | Not | And | Or
# For isinstance in hot paths (a tuple is faster than building a union at each call).
BOOLEAN_OPS = (And, Or)
LEAVES = (Compare, In, Has)


# ---- statements inside a block


@fast_init
@dataclass(frozen=True, slots=True)
class Match:
    expr: Expr
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Assign:
    key: str
    key_span: Span
    value: Value
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Default:
    assigns: tuple[Assign, ...]
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class CapItem:
    key: str
    key_span: Span
    value: Value
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Cap:
    items: tuple[CapItem, ...]
    behaviour: Value | None  # clamp | deny (word), None = clamp
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Admission:
    """`deny ["reason"]` (allow=False) or `allow` (allow=True)."""

    allow: bool
    reason: Value | None
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    key_span: Span
    values: tuple[Value, ...]
    span: Span


Stmt = Match | Default | Cap | Admission | Setting


# ---- top-level items


@fast_init
@dataclass(frozen=True, slots=True)
class Version:
    number: Value
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Include:
    path: Value
    span: Span


@fast_init
@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # defaults | unmanaged | rule
    name: Value | None  # the rule's name (string)
    stmts: tuple[Stmt, ...]
    span: Span  # from the keyword to the closing brace
    keyword_span: Span

    @property
    def title(self) -> str:
        return f'rule "{self.name.string}"' if self.kind == "rule" and self.name else self.kind


Item = Version | Include | Block


@fast_init
@dataclass(frozen=True, slots=True)
class Module:
    file: str
    text: str
    items: tuple[Item, ...]
