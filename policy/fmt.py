"""`fmt`: the canonical layout of a policy file, comments kept.

Canonical: `version` first, then includes, one blank line between blocks, two-space indent,
`key = value` settings, single spaces around operators, strings re-quoted, `cap` always ending in
its behaviour; statement order, comments and single blank lines inside blocks are kept.  Long
`match` lines wrap after `and` / `or`.  fmt(fmt(x)) == fmt(x) and fmt never changes meaning
(the compiled digest is the same), which property tests check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy import ast
from policy.diagnostics import Diagnostic, source_lines
from policy.parser import parse
from policy.printer import format_expr, format_stmt, format_value

__all__ = ["Comment", "format_module", "format_source", "scan_comments"]

INDENT = "  "
WIDTH = 100


@dataclass(frozen=True, slots=True)
class Comment:
    line: int
    text: str  # from `#` to the end of the line, trailing blanks removed
    own_line: bool


def scan_comments(text: str) -> list[Comment]:
    """Every `#` comment with its line (strings never span lines, so a line scan suffices)."""
    out: list[Comment] = []
    for n, line in enumerate(source_lines(text), 1):
        in_str = False
        i = 0
        while i < len(line):
            ch = line[i]
            if in_str:
                if ch == "\\":
                    i += 1
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "#":
                out.append(Comment(n, line[i:].rstrip(), not line[:i].strip()))
                break
            i += 1
    return out


class _Writer:
    def __init__(self, text: str) -> None:
        self.src = source_lines(text)
        self.comments = scan_comments(text)
        self.next = 0  # index of the first comment not yet written
        self.out: list[str] = []
        self.last_line = 0  # last source line written
        self.opened = False  # the last line written opened a block

    def _blank_between(self, a: int, b: int) -> bool:
        return any(not self.src[i - 1].strip() for i in range(a + 1, b) if 0 < i <= len(self.src))

    def _sep(self, line: int, force: bool | None) -> None:
        if not self.out or self.out[-1] == "" or self.opened:
            return
        if force or (force is None and self._blank_between(self.last_line, line)):
            self.out.append("")

    def comments_before(self, line: int, indent: str, force_first: bool | None = None) -> bool:
        """Write own-line comments that come before source line `line`; True if any."""
        wrote = False
        while self.next < len(self.comments) and self.comments[self.next].line < line:
            c = self.comments[self.next]
            self._sep(c.line, force_first if not wrote else None)
            self.out.append(indent + c.text)
            self.last_line = c.line
            self.next += 1
            self.opened = False
            wrote = True
        return wrote

    def trailing(self, line: int) -> str:
        if self.next < len(self.comments):
            c = self.comments[self.next]
            if c.line == line and not c.own_line:
                self.next += 1
                return "  " + c.text
        return ""

    def node(self, text: str, start: int, end: int, indent: str,
             force_sep: bool | None = None) -> None:
        wrote = self.comments_before(start, indent, True if force_sep else None)
        # own-line comments inside a multi-line statement move above it
        while (self.next < len(self.comments) and self.comments[self.next].line < end
               and self.comments[self.next].line >= start):
            c = self.comments[self.next]
            self.out.append(indent + c.text)
            self.next += 1
            self.opened = False
            wrote = True
        self._sep(start, None if wrote else force_sep)
        lines = text.split("\n")
        lines[-1] += self.trailing(end)
        self.out.extend(indent + ln if ln else ln for ln in lines)
        self.last_line = end
        self.opened = text.endswith("{")


def _wrap(expr: ast.Expr, width: int, indent: str) -> str:
    """`expr` on one line if it fits in `width`, else broken after its top-level and/or, each
    operand wrapped the same way (newlines after `and` / `or` are part of the grammar)."""
    flat = format_expr(expr)
    if len(flat) <= width:
        return flat
    if isinstance(expr, ast.Not) and isinstance(expr.operand, ast.BOOLEAN_OPS):
        return "not (" + _wrap(expr.operand, width - 5, indent + "  ") + ")"
    if not isinstance(expr, ast.BOOLEAN_OPS):
        return flat
    word = "and" if isinstance(expr, ast.And) else "or"
    parts = []
    for item in expr.items:
        group = isinstance(item, ast.Or) and word == "and"
        nested = isinstance(item, ast.BOOLEAN_OPS)
        inner = _wrap(item, width - 2, indent + "  " if nested else indent)
        parts.append(f"({inner})" if group else inner)
    return f" {word}\n{indent}".join(parts)


def _stmt_text(stmt: ast.Stmt, indent: str) -> str:
    if isinstance(stmt, ast.Match):
        return "match " + _wrap(stmt.expr, WIDTH - len(indent) - len("match "), INDENT * 3)
    return format_stmt(stmt)


def format_module(module: ast.Module) -> str:
    w = _Writer(module.text)
    prev_kind = ""
    for item in module.items:
        kind = type(item).__name__
        start, end = item.span.line, item.span.end_line
        if isinstance(item, ast.Version):
            w.node(f"version {item.number.text}", start, end, "", force_sep=False)
        elif isinstance(item, ast.Include):
            w.node(f"include {format_value(item.path)}", start, end, "",
                   force_sep=prev_kind != "Include")
        else:
            head = item.kind if item.kind != "rule" else f"rule {format_value(item.name)}"  # type: ignore[arg-type]  # a rule has a name
            w.node(head + " {", start, start, "", force_sep=True)
            for stmt in item.stmts:
                w.node(_stmt_text(stmt, INDENT), stmt.span.line, stmt.span.end_line, INDENT)
            w.comments_before(end, INDENT)
            w.opened = False
            w.out.append("}" + w.trailing(end))
            w.last_line = end
        prev_kind = kind
    w.comments_before(len(w.src) + 1, "", None)
    text = "\n".join(w.out).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text) + "\n"


def format_source(text: str, file: str) -> tuple[str | None, list[Diagnostic]]:
    module, diags = parse(text, file)
    if module is None:
        return None, diags
    return format_module(module), diags
