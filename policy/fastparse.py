"""A hand-written parser for the policy language: the same `ast` as the Lark grammar, faster.

`policy/grammar/policy.lark` stays the definition of the language and Lark the one place where
syntax errors become diagnostics.  This module is only a fast path for input that parses:
`parse_items(source, file)` returns the items Lark's grammar and `parser._ToAst` would build
(same nodes, same spans), or None at the first token it does not expect, and the caller then
runs Lark, which reports the error (or, for a corner this module declines, builds the tree).
So an input this module accepts must be one Lark accepts with the same tree; it may decline
more than Lark does, never accept more.  tests/policy/syntax/test_fast_parser_agrees_with_lark.py
checks this on generated policies, on token soup and on every keyword in every word position.

How it mirrors Lark's LALR parser with its contextual lexer:
- one regular expression with Lark's terminals (same patterns, QUANTITY before NUMBER);
  whitespace `[\\t \\f]` is skipped, a newline with the next line's indentation and comments is
  one `_NL` token, as in the grammar;
- a word is a keyword exactly where the grammar's parser state accepts that keyword (statement
  start: match default cap deny allow; expression start: not has; after a field name: and or in
  not; top level: version include defaults unmanaged rule) and a name (IDENT) elsewhere; where a
  state accepts keywords but no IDENT, any other word makes this module decline (Lark's lexer
  would match a keyword prefix there);
- spans are built as `_ToAst` builds them: from tokens and child spans, never from parentheses.
Nesting deeper than MAX_NESTING declines too, so `parser._check_depth` (GW021) cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import accumulate, repeat

from policy import ast
from policy.diagnostics import Span

__all__ = ["MAX_NESTING", "parse_items"]

MAX_NESTING = 100  # parentheses or a chain of `not`; half of parser.MAX_DEPTH

# Lark's terminals, each with the whitespace before it.  No catch-all: a character no terminal
# matches leaves a gap, and the lengths of the tokens then do not add up to the length of the
# source (see _tokens).  Alternatives start with distinct characters, so their order only
# matters where Lark's does: QUANTITY (priority 2) before NUMBER, written here as one pattern
# (digits, an optional fraction, then letters: QUANTITY when there are any), and `==` before `=`.
# Possessive quantifiers (no backtracking) match what greedy ones would: no terminal here can
# end earlier and still match.  Only on character classes: CPython 3.11.2 gets possessive
# repeats of groups wrong (`[0-9]++(?:\.[0-9]++)?+` finds "9." in "9.").
_TOKEN = re.compile(
    r"[\t \f]*+(?:"
    r"[A-Za-z_][A-Za-z0-9_./-]*+"  # IDENT, or a keyword where the parser state takes one
    r'|"(?:[^"\\\n]|\\[^\n])*"'  # STRING
    r"|(?:\r?\n[\t ]*+|#[^\n]*+)+"  # _NL: newlines, the next line's indentation, comments
    r"|[0-9]++(?:\.[0-9]++)?[A-Za-z%]*+"  # QUANTITY, or NUMBER when no letters follow
    r"|==|!=|=~|!~|<=|[=,{}()\[\]]"  # CMP_OP and punctuation
    r")"
)
_NL_START = frozenset("\n\r#")
_WORD_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGITS = frozenset("0123456789")
_CMP_OPS = frozenset(("==", "!=", "=~", "!~"))
_STATEMENT_KEYWORDS = frozenset(("match", "default", "cap", "deny", "allow"))
_AFTER_FIELD = frozenset(("and", "or", "in", "not"))  # keywords where a field key could be
_END = ""  # after the last token (no token is empty)


class _Decline(Exception):
    """Input this parser does not take: let Lark decide."""


def _tokens(source: str) -> tuple[list[str], list[int]] | None:
    """The tokens (whitespace stripped) and the offset where each ends; None when a character
    is no part of any token."""
    found = _TOKEN.findall(source)
    ends = list(accumulate(map(len, found)))
    if not ends or ends[-1] != len(source):
        return None
    toks = list(map(str.lstrip, found, repeat(" \t\f")))
    toks.append(_END)
    return toks, ends


def parse_items(source: str, file: str) -> list[ast.Item] | None:
    """The items of `source` (which ends with a newline), or None: then ask Lark."""
    lexed = _tokens(source)
    if lexed is None:
        return None
    try:
        return _Parser(lexed[0], lexed[1], file).items()
    except (_Decline, IndexError, RecursionError):
        return None


# Spans are made with tuple.__new__ directly (what the named tuple's own __new__ does, minus a
# Python call): a large policy has hundreds of thousands of them.
_new_tuple = tuple.__new__
_VALUE_KINDS = {**dict.fromkeys(_WORD_START, "word"), '"': "string",
                **dict.fromkeys(_DIGITS, "number")}


class _Parser:
    """Recursive descent over the token list.  `line`, and `ls` the offset where it starts, are
    those of the tokens after the last `_NL` consumed: every span is made before the parser
    moves past the next newline."""

    def __init__(self, toks: list[str], ends: list[int], file: str) -> None:
        self.toks = toks
        self.ends = ends
        self.i = 0
        self.file = file
        self.line = 1
        self.ls = 0
        self.depth = 0

    # ---- helpers

    def span(self, i: int) -> Span:
        """The span of token i, on the current line."""
        line = self.line
        end = self.ends[i] - self.ls + 1
        return _new_tuple(Span, (self.file, line, end - len(self.toks[i]), line, end))

    def join(self, first: Span, last: Span) -> Span:
        return _new_tuple(Span, (self.file, first[1], first[2], last[3], last[4]))

    def expect(self, text: str) -> None:
        if self.toks[self.i] != text:
            raise _Decline
        self.i += 1

    def newline(self) -> None:
        """Consume the `_NL` token that must come next."""
        i = self.i
        tok = self.toks[i]
        if tok[0] not in _NL_START:
            raise _Decline
        last = tok.rfind("\n")
        if last >= 0:
            self.line += tok.count("\n")
            self.ls = self.ends[i] - len(tok) + last + 1
        self.i = i + 1

    def skip_newline(self) -> None:
        tok = self.toks[self.i]
        if tok and tok[0] in _NL_START:
            self.newline()

    def string(self) -> ast.Value:
        i = self.i
        tok = self.toks[i]
        if tok[0] != '"':
            raise _Decline
        self.i = i + 1
        line = self.line
        end = self.ends[i] - self.ls + 1
        return _new_tuple(ast.Value, ("string", tok,
                         _new_tuple(Span, (self.file, line, end - len(tok), line, end))))

    def value(self) -> ast.Value:
        i = self.i
        tok = self.toks[i]
        kind = _VALUE_KINDS.get(tok[0])
        if kind is None:
            raise _Decline
        if kind == "number" and tok[-1] not in _DIGITS:
            kind = "quantity"
        self.i = i + 1
        line = self.line
        end = self.ends[i] - self.ls + 1
        span = _new_tuple(Span, (self.file, line, end - len(tok), line, end))
        return _new_tuple(ast.Value, (kind, tok, span))

    def word(self) -> int:
        """Index of the word that must come next (any word: a name)."""
        i = self.i
        if self.toks[i][0] not in _WORD_START:
            raise _Decline
        self.i = i + 1
        return i

    # ---- top level

    def items(self) -> list[ast.Item]:
        toks = self.toks
        self.skip_newline()
        out: list[ast.Item] = []
        while True:
            i = self.i
            text = toks[i]
            if text == _END:
                return out
            keyword = self.span(i)
            self.i = i + 1
            if text == "rule":
                name = self.string()
                out.append(self.block("rule", keyword, name))
            elif text == "defaults" or text == "unmanaged":
                out.append(self.block(text, keyword, None))
            elif text == "version":
                n = self.i
                if toks[n][0] not in _DIGITS or toks[n][-1] not in _DIGITS:
                    raise _Decline
                self.i = n + 1
                number = _new_tuple(ast.Value, ("number", toks[n], self.span(n)))
                self.newline()
                out.append(_new_tuple(ast.Version, (number, self.join(keyword, number.span))))
            elif text == "include":
                path = self.string()
                self.newline()
                out.append(_new_tuple(ast.Include, (path, self.join(keyword, path.span))))
            else:
                raise _Decline

    def block(self, kind: str, keyword: Span, name: ast.Value | None) -> ast.Block:
        toks = self.toks
        self.expect("{")
        self.skip_newline()
        stmts: list[ast.Stmt] = []
        append = stmts.append
        while True:
            i = self.i
            tok = toks[i]
            if tok == "}":
                span = _new_tuple(Span, (self.file, keyword[1], keyword[2], self.line,
                                         self.ends[i] - self.ls + 1))
                self.i = i + 1
                self.newline()
                return _new_tuple(ast.Block, (kind, name, tuple(stmts), span, keyword))
            if tok[0] not in _WORD_START:
                raise _Decline
            self.i = i + 1
            if tok in _STATEMENT_KEYWORDS:
                append(self.statement(tok, self.span(i)))
            else:
                append(self.setting(tok, self.span(i)))

    # ---- statements

    def statement(self, word: str, head: Span) -> ast.Stmt:
        toks = self.toks
        if word == "match":
            expr = self.expr()
            self.newline()
            return _new_tuple(ast.Match, (expr, self.join(head, expr.span)))
        if word == "default":
            assigns = [self.assign(ast.Assign, "=")]
            while toks[self.i] == ",":
                self.i += 1
                assigns.append(self.assign(ast.Assign, "="))
            self.newline()
            return _new_tuple(ast.Default, (tuple(assigns), self.join(head, assigns[-1].span)))
        if word == "cap":
            items = [self.assign(ast.CapItem, "<=")]
            while toks[self.i] == ",":
                self.i += 1
                items.append(self.assign(ast.CapItem, "<="))
            behaviour = None
            if toks[self.i][0] in _WORD_START:
                i = self.i
                self.i = i + 1
                behaviour = _new_tuple(ast.Value, ("word", toks[i], self.span(i)))
            self.newline()
            last = behaviour.span if behaviour is not None else items[-1].span
            return _new_tuple(ast.Cap, (tuple(items), behaviour, self.join(head, last)))
        if word == "deny":
            reason = self.string() if toks[self.i][0] == '"' else None
            self.newline()
            span = self.join(head, reason.span) if reason else head
            return _new_tuple(ast.Admission, (False, reason, span))
        self.newline()  # allow
        return _new_tuple(ast.Admission, (True, None, head))

    def assign(self, cls: type[ast.Assign] | type[ast.CapItem],
               op: str) -> ast.Assign | ast.CapItem:
        toks = self.toks
        i = self.i
        key = toks[i]
        if key[0] not in _WORD_START or toks[i + 1] != op:
            raise _Decline
        key_span = self.span(i)
        self.i = i + 2
        value = self.value()
        return _new_tuple(cls, (key, key_span, value, self.join(key_span, value.span)))

    def setting(self, key: str, key_span: Span) -> ast.Setting:
        toks = self.toks
        if toks[self.i] == "=":
            self.i += 1
        values = [self.value()]
        while toks[self.i][0] not in _NL_START:
            values.append(self.value())
        self.newline()
        span = self.join(key_span, values[-1].span)
        return _new_tuple(ast.Setting, (key, key_span, tuple(values), span))

    # ---- match expressions

    def chain(self, word: str, node: type, operand: Callable[[], ast.Expr]) -> ast.Expr:
        """`operand (word operand)*`, flattened into one `node` (ast.Or / ast.And) as Lark's
        transformer does; a lone operand is returned as it is."""
        toks = self.toks
        first = operand()
        if toks[self.i] != word:
            return first
        items = list(first.items) if isinstance(first, node) else [first]
        last = first
        while toks[self.i] == word:
            self.i += 1
            self.skip_newline()
            last = operand()
            if isinstance(last, node):
                items.extend(last.items)
            else:
                items.append(last)
        return _new_tuple(node, (tuple(items), self.join(first.span, last.span)))

    def expr(self) -> ast.Expr:
        return self.chain("or", ast.Or, self.and_expr)

    def and_expr(self) -> ast.Expr:
        toks = self.toks
        first = self.chain("and", ast.And, self.not_expr)
        # Past an operand Lark's state takes `and`, `or`, `)` or `_NL` and no IDENT: another
        # word would lex as a keyword prefix there.
        tok = toks[self.i]
        if tok[0] in _WORD_START and tok != "or":
            raise _Decline
        return first

    def not_expr(self) -> ast.Expr:
        i = self.i
        if self.toks[i] != "not":
            return self.atom()
        head = self.span(i)
        self.i = i + 1
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _Decline
        operand = self.not_expr()
        self.depth -= 1
        return _new_tuple(ast.Not, (operand, self.join(head, operand.span)))

    def atom(self) -> ast.Expr:
        toks = self.toks
        i = self.i
        tok = toks[i]
        if tok == "(":
            self.i = i + 1
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _Decline
            self.skip_newline()
            inner = self.expr()
            self.skip_newline()
            self.expect(")")
            self.depth -= 1
            return inner
        if tok == "has":
            head = self.span(i)
            self.i = i + 1
            field = self.field(self.word())
            return _new_tuple(ast.Has, (field, self.join(head, field.span)))
        field = self.field(self.word())
        i = self.i
        op = toks[i]
        self.i = i + 1
        if op in _CMP_OPS:
            value = self.string()
            return _new_tuple(ast.Compare, (field, op, value, self.join(field.span, value.span)))
        if op == "in":
            return self.in_list(field, False)
        if op == "not" and toks[i + 1] == "in":
            self.i = i + 2
            return self.in_list(field, True)
        raise _Decline

    def field(self, name: int) -> ast.Field:
        toks = self.toks
        name_span = self.span(name)
        i = self.i
        key = toks[i]
        c = key[0]
        if c == '"' or (c in _WORD_START and key not in _AFTER_FIELD):
            self.i = i + 1
            span = _new_tuple(Span, (self.file, name_span[1], name_span[2], self.line,
                                     self.ends[i] - self.ls + 1))
            if c == '"':
                return _new_tuple(ast.Field, (toks[name], ast.unquote(key), True, span, name_span))
            return _new_tuple(ast.Field, (toks[name], key, False, span, name_span))
        return _new_tuple(ast.Field, (toks[name], None, False, name_span, name_span))

    def in_list(self, field: ast.Field, negated: bool) -> ast.In:
        toks = self.toks
        self.expect("[")
        self.skip_newline()
        values: list[ast.Value] = []
        while toks[self.i][0] == '"':
            values.append(self.string())
            if toks[self.i] == ",":
                self.i += 1
                self.skip_newline()
            else:
                self.skip_newline()
                break
        i = self.i
        if toks[i] != "]":
            raise _Decline
        fs = field.span
        span = _new_tuple(Span, (self.file, fs[1], fs[2], self.line, self.ends[i] - self.ls + 1))
        self.i = i + 1
        return _new_tuple(ast.In, (field, tuple(values), negated, span))
