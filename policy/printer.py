"""Canonical text of expressions and statements (shared by `fmt` and the compiler's digest)."""

from __future__ import annotations

from policy import ast

__all__ = ["format_expr", "format_field", "format_stmt", "format_value"]

_PREC = {"or": 1, "and": 2, "not": 3, "atom": 4}


def format_value(value: ast.Value) -> str:
    text = value.text
    if value.kind != "string":
        return text
    if (text.count('"') == 2 and text[0] == '"' and text[-1] == '"'
            and "\\" not in text and "\t" not in text and "\n" not in text):
        return text  # written canonically already: quote(unquote(text)) == text
    return ast.quote(value.string)


def format_field(field: ast.Field) -> str:
    if field.key is None:
        return field.name
    key = field.key
    plain = key and not field.key_quoted and key not in _RESERVED
    return f"{field.name} {key if plain else ast.quote(key)}"


_RESERVED = {"and", "or", "not", "in", "has", "match", "default", "cap", "deny", "allow",
             "version", "include", "defaults", "unmanaged", "rule"}


def _prec(expr: ast.Expr) -> int:
    return _PREC_OF.get(type(expr), 4)


def format_expr(expr: ast.Expr) -> str:
    """Minimal parentheses: `not` binds tighter than `and`, `and` tighter than `or`."""
    if isinstance(expr, ast.Compare):
        return f"{format_field(expr.field)} {expr.op} {format_value(expr.value)}"
    if isinstance(expr, ast.In):
        items = ", ".join([format_value(v) for v in expr.values])
        op = "not in" if expr.negated else "in"
        return f"{format_field(expr.field)} {op} [{items}]"
    if isinstance(expr, ast.Has):
        return f"has {format_field(expr.field)}"
    if isinstance(expr, ast.Not):
        operand = expr.operand
        inner = format_expr(operand)
        return f"not {inner}" if _prec(operand) >= 3 else f"not ({inner})"
    mine = _PREC_OF[type(expr)]
    parts = []
    for item in expr.items:
        text = format_expr(item)
        # Same-operator children are flattened by the parser only when written without
        # parentheses; keep explicit grouping of equal precedence flat (it is associative).
        parts.append(text if _PREC_OF.get(type(item), 4) >= mine else f"({text})")
    return (" and " if isinstance(expr, ast.And) else " or ").join(parts)


_PREC_OF: dict[type, int] = {ast.Or: _PREC["or"], ast.And: _PREC["and"], ast.Not: _PREC["not"]}


def format_stmt(stmt: ast.Stmt) -> str:
    if isinstance(stmt, ast.Match):
        return f"match {format_expr(stmt.expr)}"
    if isinstance(stmt, ast.Default):
        return "default " + ", ".join(f"{a.key} = {format_value(a.value)}" for a in stmt.assigns)
    if isinstance(stmt, ast.Cap):
        items = ", ".join(f"{c.key} <= {format_value(c.value)}" for c in stmt.items)
        behaviour = stmt.behaviour.text if stmt.behaviour else "clamp"
        return f"cap {items} {behaviour}"
    if isinstance(stmt, ast.Admission):
        if stmt.allow:
            return "allow"
        return f"deny {format_value(stmt.reason)}" if stmt.reason else "deny"
    return f"{stmt.key} = " + " ".join(format_value(v) for v in stmt.values)
