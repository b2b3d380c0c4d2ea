"""Text -> `ast.Module`, or diagnostics.  The one place where Lark errors become diagnostics."""

from __future__ import annotations

import functools
import re
import threading
from importlib import resources
from typing import Any, cast

from lark import Lark, Token, Transformer
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)

from policy import ast
from policy.diagnostics import Diagnostic, Severity, Span, closest, source_lines
from policy.lalr import FastLalr
from policy.vocabulary import FIELD, FIELDS

__all__ = ["STATEMENT_KEYWORDS", "TOP_KEYWORDS", "parse", "parse_with_lark", "parser"]

TOP_KEYWORDS = ("version", "include", "defaults", "unmanaged", "rule")
STATEMENT_KEYWORDS = ("match", "default", "cap", "deny", "allow")
# Settings a statement may start with (those a rule takes first); the compiler owns the
# per-block vocabularies, this list only serves "did you mean" when a line does not parse at all.
SETTING_WORDS = tuple(sorted((f.key for f in FIELDS), key=lambda k: "rule" not in FIELD[k].blocks))
MAX_DEPTH = 200  # nesting of parentheses / `not`; deeper input gets GW021, not a RecursionError

_TOKEN_NAMES = {
    "_NL": "end of line",
    "$END": "end of file",
    "IDENT": "a name",
    "STRING": 'a "string"',
    "NUMBER": "a number",
    "QUANTITY": "a quantity like 40GiB",
    "CMP_OP": "a comparison (== != =~ !~)",
    "RBRACE": "`}`",
    "LBRACE": "`{`",
}


_LOCK = threading.Lock()


@functools.cache
def _parser_and_builder() -> tuple[Lark, _ToAst]:
    grammar = resources.files("policy").joinpath("grammar/policy.lark").read_text("utf-8")
    builder = _ToAst()
    # The transformer runs inside the LALR parser as rules reduce: no parse tree is built,
    # which halves the time of a large file.
    lark = Lark(grammar, parser="lalr", lexer="contextual", transformer=builder,
                maybe_placeholders=False)
    return lark, builder


def parser() -> Lark:
    return _parser_and_builder()[0]


@functools.cache
def _fast() -> FastLalr:
    return FastLalr(parser(), MAX_DEPTH)


def _parse_fast(source: str, file: str) -> list[ast.Item] | None:
    """The items by Lark's own tables in one loop (policy.lalr), or None for any input Lark
    would reject or that nests deeper than MAX_DEPTH: `parse_with_lark` then says why."""
    fast = _fast()
    builder = _parser_and_builder()[1]
    with _LOCK:  # the builder carries the file name of the parse in progress
        builder.file = file
        items: list[ast.Item] | None = fast.parse(source)
    return items


def parse(text: str, file: str) -> tuple[ast.Module | None, list[Diagnostic]]:
    """Parse one file.  Never raises on any input: problems come back as diagnostics, every
    syntax error of the file (up to MAX_SYNTAX_ERRORS), with no module."""
    module, diags = parse_recovering(text, file)
    return (None, diags) if diags else (module, [])


def parse_recovering(text: str, file: str) -> tuple[ast.Module | None, list[Diagnostic]]:
    """Like `parse`, but after a syntax error on a statement line inside a block, that line is
    blanked and the parse tried again, so one run reports the file's further syntax errors.
    With errors, the module returned is the recovered one (statements in error left out; every
    position unchanged), which the loader still compiles to report semantic errors too."""
    source = text if text.endswith("\n") else text + "\n"
    items = _parse_fast(source, file)
    if items is not None:
        return ast.Module(file=file, text=text, items=tuple(items)), []
    lines = source_lines(text)
    depth_error = _check_depth(source, file, lines)
    if depth_error:
        return None, [depth_error]
    diags: list[Diagnostic] = []
    blanked: set[int] = set()
    while True:
        items, diag = _parse_once(source, file, lines)
        if diag is None:
            module = ast.Module(file=file, text=text, items=tuple(items or ()))
            return module, diags
        diags.append(diag)
        line = diag.span.line
        if (len(diags) >= MAX_SYNTAX_ERRORS or line in blanked or diag.code not in _RECOVERABLE
                or not _is_statement_line(source, line)
                or _in_brackets(source, _offset(source, diag.span.line, diag.span.col))):
            # Past a broken block header or inside an unclosed ( or [, what follows would
            # only produce errors that are consequences of this one.
            return None, diags
        blanked.add(line)
        source = _blank_line(source, line)


def parse_with_lark(text: str, file: str) -> tuple[list[ast.Item] | None, Diagnostic | None]:
    """The items by Lark alone (no fast path, no recovery), or the first error: the reference
    that tests hold `policy.lalr` to."""
    lines = source_lines(text)
    source = text if text.endswith("\n") else text + "\n"
    depth_error = _check_depth(source, file, lines)
    if depth_error:
        return None, depth_error
    return _parse_once(source, file, lines)


MAX_SYNTAX_ERRORS = 20
_RECOVERABLE = ("GW001", "GW002", "GW020")


def _parse_once(source: str, file: str,
                lines: list[str]) -> tuple[list[ast.Item] | None, Diagnostic | None]:
    lark, builder = _parser_and_builder()
    try:
        with _LOCK:  # the builder carries the file name of the parse in progress
            builder.file = file
            # the builder runs inline (LALR), so parse returns `start`'s list, not a Tree
            return cast(list[ast.Item], lark.parse(source)), None
    except UnexpectedInput as err:
        return None, _convert(err, source, file, lines)
    except LarkError as err:  # any other Lark failure still gets a code and a place
        return None, _diag("GW001", Span.point(file), f"cannot parse: {err}", lines)
    except RecursionError as err:
        return None, _diag("GW021", Span.point(file), f"cannot build the syntax tree: {err}",
                           lines)


def _is_statement_line(source: str, line: int) -> bool:
    """A line inside a block that is neither a block header nor a closing brace."""
    text = source.split("\n")[line - 1] if line <= source.count("\n") + 1 else ""
    word = _first_word(text)
    if not text.strip() or text.strip().startswith("}") or "{" in text.split("#")[0]:
        return False
    if word is not None and word[0] in TOP_KEYWORDS:
        return False
    return bool(_open_blocks(source, _offset(source, line, 1)))


def _in_brackets(source: str, upto: int) -> bool:
    """Whether a `(` or `[` is open at offset `upto` (strings and comments skipped)."""
    depth = 0
    for m in re.finditer(r'"(?:[^"\\\n]|\\[^\n])*"|#[^\n]*|[()\[\]]', source[:upto]):
        tok = m.group(0)
        if tok in "([":
            depth += 1
        elif tok in ")]":
            depth = max(0, depth - 1)
    return depth > 0


def _blank_line(source: str, line: int) -> str:
    parts = source.split("\n")
    parts[line - 1] = " " * len(parts[line - 1])
    return "\n".join(parts)


# ---- Lark errors -> diagnostics (the only place)


def _diag(code: str, span: Span, message: str, lines: list[str], hint: str | None = None,
          related: tuple[tuple[Span, str], ...] = ()) -> Diagnostic:
    src = lines[span.line - 1] if 0 < span.line <= len(lines) else ""
    return Diagnostic(code, Severity.ERROR, span, message, hint, src, related)


def _describe(token_type: str, value: str = "") -> str:
    if token_type in _TOKEN_NAMES:
        return _TOKEN_NAMES[token_type]
    if value:
        return f"`{value}`"
    return token_type.lower()


def _expected(expected: set[str] | frozenset[str]) -> str:
    names = sorted({_describe(t, _literal(t)) for t in expected})
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def _literal(token_type: str) -> str:
    try:
        for term in parser().terminals:
            if term.name == token_type and term.pattern.type == "str":
                return str(term.pattern.value)
    except LarkError:  # pragma: no cover - the grammar is static
        pass
    return ""


def _open_blocks(source: str, upto: int) -> list[tuple[int, int]]:
    """(line, col) of each `{` still open at offset `upto`, ignoring strings and comments."""
    stack: list[tuple[int, int]] = []
    line, col, i = 1, 1, 0
    in_str = False
    while i < min(upto, len(source)):
        ch = source[i]
        if in_str:
            if ch == "\\":
                i += 1
                col += 1
            elif ch == '"' or ch == "\n":
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "#":
            while i < len(source) and source[i] != "\n":
                i += 1
            continue
        elif ch == "{":
            stack.append((line, col))
        elif ch == "}" and stack:
            stack.pop()
        if i < len(source) and source[i] == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    return stack


def _first_word(line: str) -> tuple[str, int] | None:
    m = re.match(r"[\t ]*([A-Za-z_][A-Za-z0-9_.\/-]*)", line)
    return (m.group(1), m.start(1) + 1) if m else None


def _convert(err: UnexpectedInput, source: str, file: str, lines: list[str]) -> Diagnostic:
    line = getattr(err, "line", -1)
    col = getattr(err, "column", -1)
    if isinstance(err, UnexpectedEOF) or (
        isinstance(err, UnexpectedToken) and err.token.type == "$END"
    ):
        line, col = len(source.split("\n")), 1
    if line is None or line < 1:
        line, col = max(1, len(lines)), 1
    offset = _offset(source, line, col)

    # An unclosed `{` shows up as a surprise further down: at the next top-level keyword or at
    # the end of the file.  Point at the block that was left open.
    token = err.token if isinstance(err, UnexpectedToken) else None
    at_eof = (token is None and isinstance(err, UnexpectedEOF)) or (
        token is not None and token.type == "$END"
    )
    word = _first_word(lines[line - 1]) if 0 < line <= len(lines) else None
    open_blocks = _open_blocks(source, offset)
    if open_blocks and (at_eof or (word is not None and word[0] in TOP_KEYWORDS)):
        bl, bc = open_blocks[-1]
        opener = lines[bl - 1] if bl <= len(lines) else ""
        head = opener.split("#")[0].strip().rstrip("{").strip() or "block"
        where = "the end of the file" if at_eof else f"`{word[0] if word else ''}` on line {line}"
        start = (_first_word(opener) or ("", bc))[1]
        span = Span(file, bl, start, bl, bc + 1)
        return _diag("GW003", span, f"`{head}` block is never closed before {where}", lines,
                     hint="add `}` on its own line where the block ends")

    if isinstance(err, UnexpectedCharacters):
        ch = source[offset] if offset < len(source) else ""
        span = Span(file, line, col, line, col + 1)
        special = _CHAR_HINTS.get(source[offset:offset + 2]) or _CHAR_HINTS.get(ch)
        if special:
            return _diag("GW001", span, f"unexpected character `{ch}`", lines, hint=special)
        if ch == '"':
            return _diag("GW020", Span(file, line, col, line, len(lines[line - 1]) + 1),
                         "unterminated string", lines,
                         hint='close the string with `"` on the same line')
        shown = repr(ch) if not ch.isprintable() or ch.isspace() else f"`{ch}`"
        return _diag("GW001", span, f"unexpected character {shown}", lines,
                     hint=f"expected {_expected(err.allowed)}" if err.allowed else None)

    if isinstance(err, UnexpectedToken) and token is not None and not at_eof:
        # A misspelt keyword at the start of a statement parses as a setting name and fails
        # on the next word; say what the word was meant to be.
        if word is not None and word[1] <= col and token.type != "_NL":
            guess = closest(word[0], (*TOP_KEYWORDS, *STATEMENT_KEYWORDS, *SETTING_WORDS))
            known = word[0] in (*TOP_KEYWORDS, *STATEMENT_KEYWORDS, *SETTING_WORDS)
            if guess and not known:
                span = Span(file, line, word[1], line, word[1] + len(word[0]))
                return _diag("GW002", span, f"unknown keyword `{word[0]}`", lines,
                             hint=f"did you mean `{guess}`?")
        text = str(token.value)
        end = col + max(1, len(text.split("\n")[0]))
        span = Span(file, line, col, line, end)
        shown = "end of line" if token.type == "_NL" else f"`{text}`"
        hint = _token_hint(token, set(err.expected), open_blocks)
        if hint is None and err.expected:
            hint = f"expected {_expected(err.expected)}"
        return _diag("GW001", span, f"unexpected {shown}", lines, hint=hint)

    span = Span(file, line, col, line, col + 1)
    expected = getattr(err, "expected", None)
    return _diag("GW001", span, "unexpected end of file", lines,
                 hint=f"expected {_expected(expected)}" if expected else None)


_CHAR_HINTS = {
    "&&": "write `and`",
    "||": "write `or`",
    "!": "write `not`, or `!=` / `!~` to compare",
    ":": "settings are written `key = value`",
    "<": "caps are written `cap gpumem <= 8GiB`",
    ";": "statements end at the end of the line; no `;`",
    "'": 'strings use double quotes: "like this"',
}


def _token_hint(token: Token, expected: set[str], open_blocks: list[tuple[int, int]]) -> str | None:
    """A targeted hint for the most common mistakes, else None (the expected tokens are shown)."""
    value = str(token.value)
    if value == "=" and "CMP_OP" in expected:
        return "to compare, write `==`"
    if token.type in ("IDENT", "NUMBER", "QUANTITY") and expected <= {"STRING", "LSQB"} | {
            t for t in expected if t.startswith("__ANON")} and "STRING" in expected:
        return f'quote it: `"{value}"`'
    if "LSQB" in expected and token.type == "STRING" and "STRING" not in expected:
        return f"`in` takes a list: `in [{value}]`"
    if token.type == "RBRACE" and not open_blocks:
        return "this `}` closes no block"
    if expected == {"RSQB"} or expected == {"RSQB", "COMMA"}:
        return "the list is not closed: add `]`"
    if expected == {"EQUAL"}:
        return "write `key = value`"
    return None


def _offset(source: str, line: int, col: int) -> int:
    pos = 0
    for _ in range(line - 1):
        nxt = source.find("\n", pos)
        if nxt < 0:
            return len(source)
        pos = nxt + 1
    return min(len(source), pos + max(0, col - 1))


def _check_depth(source: str, file: str, lines: list[str]) -> Diagnostic | None:
    """Refuse absurd nesting up front so that no later recursion can overflow."""
    depth = 0
    nots = 0
    line, line_start = 1, 0
    for m in re.finditer(r'"(?:[^"\\\n]|\\[^\n])*"|#[^\n]*|\n|\(|\)|\bnot\b|[^\s()"#]+', source):
        tok = m.group(0)
        if tok == "\n":
            line, line_start = line + 1, m.end()
            continue
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth = max(0, depth - 1)
        nots = nots + 1 if tok == "not" else 0
        if depth > MAX_DEPTH or nots > MAX_DEPTH:
            col = m.start() - line_start + 1
            return _diag("GW021", Span(file, line, col, line, col + len(tok)),
                         f"expression nested more than {MAX_DEPTH} levels deep", lines,
                         hint="split the match into simpler rules")
    return None


# ---- tree -> AST (applied by the LALR parser as it reduces: no parse tree is built)


_tuple = tuple.__new__  # builds a Span without its keyword-handling __new__ (hot: ~300k a file)


def _tspan(file: str, tok: Token) -> Span:
    return _tuple(Span, (file, tok.line or 1, tok.column or 1, tok.end_line or 1,
                         tok.end_column or 1))


def _join(file: str, first: Span, last: Span) -> Span:
    return _tuple(Span, (file, first[1], first[2], last[3], last[4]))


def _operands(expr: ast.Expr, kind: type[ast.And] | type[ast.Or]) -> tuple[ast.Expr, ...]:
    return expr.items if isinstance(expr, kind) else (expr,)


class _ToAst(Transformer):  # type: ignore[type-arg]  # rules return many node types
    """One method per grammar rule; spans come from tokens and children (no Lark meta)."""

    def __init__(self) -> None:
        super().__init__()
        self.file = "<policy>"

    def _t(self, tok: Token) -> Span:
        return _tspan(self.file, tok)

    def _from(self, first: Token | Span, last: Any) -> Span:
        a = _tspan(self.file, first) if first.__class__ is Token else first
        b = _tspan(self.file, last) if last.__class__ is Token else last.span
        return _join(self.file, a, b)  # type: ignore[arg-type]  # __class__ is: no narrowing

    # values
    def quantity(self, c: list[Token]) -> ast.Value:
        return ast.Value("quantity", str(c[0]), self._t(c[0]))

    def number(self, c: list[Token]) -> ast.Value:
        return ast.Value("number", str(c[0]), self._t(c[0]))

    def string(self, c: list[Token]) -> ast.Value:
        return ast.Value("string", str(c[0]), self._t(c[0]))

    def word(self, c: list[Token]) -> ast.Value:
        return ast.Value("word", str(c[0]), self._t(c[0]))

    # expressions
    def field(self, c: list[Token]) -> ast.Field:
        name = c[0]
        key = c[1] if len(c) > 1 else None
        key_text = None
        if key is not None:
            key_text = ast.unquote(str(key)) if key.type == "STRING" else str(key)
        return ast.Field(str(name), key_text, key is not None and key.type == "STRING",
                         self._from(name, key if key is not None else name), self._t(name))

    def compare(self, c: list[Any]) -> ast.Compare:
        field, op, value = c
        v = ast.Value("string", str(value), self._t(value))
        return ast.Compare(field, str(op), v, self._from(field.span, v))

    def _in(self, c: list[Any], negated: bool) -> ast.In:
        field = c[0]
        values, end = c[-1]
        return ast.In(field, values, negated, self._from(field.span, end))

    def in_(self, c: list[Any]) -> ast.In:
        return self._in(c, False)

    def not_in(self, c: list[Any]) -> ast.In:
        return self._in(c, True)

    def has(self, c: list[Any]) -> ast.Has:
        return ast.Has(c[-1], self._from(c[0], c[-1]))

    def not_(self, c: list[Any]) -> ast.Not:
        return ast.Not(c[-1], self._from(c[0], c[-1]))

    # `and` / `or` are associative: chains and parenthesised groups of the same operator are
    # flattened, so `a and (b and c)` and `a and b and c` are one tree (fmt and digest agree).
    def and_(self, c: list[Any]) -> ast.And:
        left, right = c[0], c[-1]
        items = (*_operands(left, ast.And), *_operands(right, ast.And))
        return ast.And(items, self._from(left.span, right))

    def or_(self, c: list[Any]) -> ast.Or:
        left, right = c[0], c[-1]
        items = (*_operands(left, ast.Or), *_operands(right, ast.Or))
        return ast.Or(items, self._from(left.span, right))

    # statements
    def match(self, c: list[Any]) -> ast.Match:
        return ast.Match(c[-1], self._from(c[0], c[-1]))

    def assign(self, c: list[Any]) -> ast.Assign:
        key, value = c
        return ast.Assign(str(key), self._t(key), value, self._from(key, value))

    def default(self, c: list[Any]) -> ast.Default:
        return ast.Default(tuple(c[1:]), self._from(c[0], c[-1]))

    def cap_item(self, c: list[Any]) -> ast.CapItem:
        key, value = c
        return ast.CapItem(str(key), self._t(key), value, self._from(key, value))

    def cap(self, c: list[Any]) -> ast.Cap:
        items = tuple(x for x in c if isinstance(x, ast.CapItem))
        last = c[-1]
        behaviour = None
        if isinstance(last, Token) and last.type == "IDENT":
            behaviour = ast.Value("word", str(last), self._t(last))
        return ast.Cap(items, behaviour, self._from(c[0], behaviour or items[-1]))

    def deny(self, c: list[Any]) -> ast.Admission:
        reason = ast.Value("string", str(c[1]), self._t(c[1])) if len(c) > 1 else None
        return ast.Admission(False, reason, self._from(c[0], reason or c[0]))

    def allow(self, c: list[Any]) -> ast.Admission:
        return ast.Admission(True, None, self._t(c[0]))

    def setting(self, c: list[Any]) -> ast.Setting:
        key = c[0]
        return ast.Setting(str(key), self._t(key), tuple(c[1:]), self._from(key, c[-1]))

    # blocks and items
    def block(self, c: list[Any]) -> tuple[list[ast.Stmt], Token]:
        return [x for x in c if not isinstance(x, Token)], c[-1]

    def _block(self, kind: str, keyword: Token, name: ast.Value | None,
               body: tuple[list[ast.Stmt], Token]) -> ast.Block:
        stmts, rbrace = body
        return ast.Block(kind, name, tuple(stmts), self._from(keyword, rbrace), self._t(keyword))

    def defaults(self, c: list[Any]) -> ast.Block:
        return self._block("defaults", c[0], None, c[1])

    def unmanaged(self, c: list[Any]) -> ast.Block:
        return self._block("unmanaged", c[0], None, c[1])

    def rule(self, c: list[Any]) -> ast.Block:
        name = ast.Value("string", str(c[1]), self._t(c[1]))
        return self._block("rule", c[0], name, c[2])

    def version(self, c: list[Token]) -> ast.Version:
        num = ast.Value("number", str(c[1]), self._t(c[1]))
        return ast.Version(num, self._from(c[0], c[1]))

    def include(self, c: list[Token]) -> ast.Include:
        path = ast.Value("string", str(c[1]), self._t(c[1]))
        return ast.Include(path, self._from(c[0], c[1]))

    def start(self, c: list[Any]) -> list[ast.Item]:
        return list(c)

    # last in the class: once defined, `list` in this class body names the rule, not the type
    def list(self, c: list[Token]) -> tuple[tuple[ast.Value, ...], Token]:
        values = tuple(ast.Value("string", str(t), self._t(t)) for t in c
                       if isinstance(t, Token) and t.type == "STRING")
        return values, c[-1]
