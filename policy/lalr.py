"""Lark's own LALR tables and contextual lexer, run in one loop.

Lark spends most of a large file's parse in its per-token machinery (a generator per token,
a line counter object, a parser-state object, exception frames), not in the regular
expressions or the grammar's callbacks.  `FastLalr` takes everything that defines the language
from a built `Lark` instance -- the parse table, the per-state terminal scanners, the keyword
retyping of identifiers and the grammar's tree-building callbacks -- and drives them in a
single tight loop.  It holds no knowledge of the policy language: the grammar file stays its
only definition.

The loop has no error handling of its own: at the first character or token Lark would reject
(or nesting deeper than `max_depth`), `parse` returns None and the caller parses with Lark, which
produces the error with its expected tokens.  tests/policy/syntax holds the two to the same
result on every corpus file and on generated ones.
"""

from __future__ import annotations

import re

# Python's own regular-expression parser (private, stable since 3.11; typeshed has no stubs).
import re._constants as sre  # type: ignore[import-not-found]  # no stubs
import re._parser as sre_parse  # type: ignore[import-not-found]  # no stubs
from collections.abc import Callable
from re import Match, Pattern
from typing import Any

from lark import Lark, Token
from lark.lexer import BasicLexer, UnlessCallback
from lark.parsers.lalr_analysis import Shift

__all__ = ["FastLalr"]

_new_str = str.__new__


def _first(items: Any) -> tuple[set[str] | None, bool]:
    """The characters a parsed regular expression can start with (None: not worked out here)
    and whether it can match the empty string."""
    out: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            return out | {chr(av)}, False
        if op is sre.IN:
            for o, a in av:
                if o is sre.LITERAL:
                    out.add(chr(a))
                elif o is sre.RANGE and a[1] - a[0] < 256:
                    out.update(chr(c) for c in range(a[0], a[1] + 1))
                else:
                    return None, False
            return out, False
        if op is sre.AT:
            continue
        if op is sre.SUBPATTERN:
            subs, nullable = [av[-1]], False
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            subs, nullable = [av[2]], av[0] == 0
        elif op is sre.BRANCH:
            subs, nullable = av[1], False
        else:
            return None, False
        for sub in subs:
            chars, empty = _first(sub)
            if chars is None:
                return None, False
            out |= chars
            nullable = nullable or empty
        if not nullable:
            return out, False
    return out, True


def _skipping(lexer: BasicLexer, mre: Pattern[str]) -> Pattern[str]:
    """The scanner's regex, skipping the ignored run before a token in the same match when that
    changes nothing: one ignore terminal of the form [chars]+ with no newline, whose characters
    no other terminal of the state can start with.  Else the regex as it is."""
    ignore = [t for t in lexer.terminals if t.name in lexer.ignore_types]
    if len(ignore) != 1 or ignore[0].name in lexer.newline_types:
        return mre
    regexp = ignore[0].pattern.to_regexp()
    parsed = list(sre_parse.parse(regexp))
    if not (len(parsed) == 1 and parsed[0][0] is sre.MAX_REPEAT and parsed[0][1][0] == 1
            and len(parsed[0][1][2]) == 1 and parsed[0][1][2][0][0] is sre.IN):
        return mre
    skipped, _ = _first(parsed)
    for t in lexer.terminals:
        if t is not ignore[0]:
            chars, _ = _first(sre_parse.parse(t.pattern.to_regexp()))
            if skipped is None or chars is None or chars & skipped:
                return mre
    return re.compile(f"(?:{regexp})?(?:{mre.pattern})", mre.flags)


_NEWLINES, _IGNORED, _KEYWORDS = 1, 2, 4  # what a scanner's match may need beyond a token


class _Scanner:
    """One parser state's lexer: Lark's compiled terminal regex and what its matches mean."""

    __slots__ = ("keywords", "kinds", "match", "retype")

    def __init__(self, lexer: BasicLexer) -> None:
        mres = lexer.scanner._mres
        if len(mres) != 1:  # Lark splits past 100 terminals; this grammar has ~30
            raise ValueError("FastLalr supports one scanner regex per state")
        self.match: Callable[[str, int], Match[str] | None] = _skipping(lexer, mres[0]).match
        # Identifiers that spell a keyword become that keyword (Lark's UnlessCallback).
        self.retype: dict[str, Any] = {}  # terminal -> Lark's Scanner of the keywords
        for name, callback in lexer.callback.items():
            if not isinstance(callback, UnlessCallback):
                raise ValueError(f"FastLalr cannot run the lexer callback of {name}")
            self.retype[name] = callback.scanner
        self.kinds: dict[str, int] = {
            t.name: (_NEWLINES if t.name in lexer.newline_types else 0)
            | (_IGNORED if t.name in lexer.ignore_types else 0)
            | (_KEYWORDS if t.name in self.retype else 0)
            for t in lexer.terminals}
        self.keywords: dict[tuple[str, str], str] = {}

    def token_type(self, name: str, value: str) -> str:
        key = (name, value)
        found = self.keywords.get(key)
        if found is None:
            found = str(self.retype[name].fullmatch(value) or name)
            if len(self.keywords) < 4096:
                self.keywords[key] = found
        return found


def _passes_through(rule: Any) -> bool:
    """Lark's tree builder returns the one child of this rule unchanged (ExpandSingleChild)."""
    if not rule.options.expand1 or rule.alias or len(rule.expansion) != 1:
        return False
    symbol = rule.expansion[0]
    return not (symbol.is_term and symbol.filter_out)


class FastLalr:
    """Parse with the tables of `lark` (built with parser="lalr", lexer="contextual" and an
    inline transformer); `parse(text)` gives what `lark.parse(text)` gives, or None."""

    def __init__(self, lark: Lark, max_depth: int) -> None:
        frontend = lark.parser
        lalr = frontend.parser.parser
        table = lalr.parse_table
        self.start: int = table.start_states["start"]
        self.end: int = table.end_states["start"]
        callbacks = lalr.callbacks
        if any(isinstance(k, str) for k in callbacks):
            raise ValueError("FastLalr does not run terminal callbacks")
        # Terminals that no rule keeps (punctuation, `_NL`): the tree builder drops them, so
        # they are pushed as plain strings, not Tokens.
        self.kept: frozenset[str] = frozenset(
            sym.name for rule in callbacks for sym in rule.expansion
            if sym.is_term and not sym.filter_out)
        # Per state and symbol: a shift (next state) or a reduction resolved once to
        # (symbols popped, the rule's callback, the rule's name as a plain str).
        # A `?rule` reduced from one kept symbol is that symbol's value: no callback (None).
        self.actions: dict[int, dict[str, int | tuple[int, Callable[[list[Any]], Any] | None,
                                                     str]]] = {
            state: {symbol: arg if action is Shift else
                    (len(arg.expansion), None if _passes_through(arg) else callbacks[arg],
                     str(arg.origin.name))
                    for symbol, (action, arg) in row.items()}
            for state, row in table.states.items()}
        by_lexer: dict[int, _Scanner] = {}
        self.scanners: dict[int, _Scanner] = {}
        for state, lexer in frontend.lexer.lexers.items():
            scanner = by_lexer.get(id(lexer))
            if scanner is None:
                scanner = by_lexer[id(lexer)] = _Scanner(lexer)
            self.scanners[state] = scanner
        self.max_depth = max_depth

    def parse(self, text: str) -> Any:
        actions, scanners, kept, max_depth = self.actions, self.scanners, self.kept, self.max_depth
        end_state = self.end
        state_stack = [self.start]
        value_stack: list[Any] = []
        pos, end, line, line_start = 0, len(text), 1, 0
        last: Token | None = None
        token: Any
        while True:
            if pos < end:
                scanner = scanners[state_stack[-1]]
                m = scanner.match(text, pos)
                if m is None:
                    return None
                name = m.lastgroup
                value = m.group(name)  # type: ignore[arg-type]  # every alternative is named
                pos = m.end()
                start = pos - len(value)
                start_line, column = line, start - line_start + 1
                kind = scanner.kinds[name]  # type: ignore[index]  # named, as above
                if kind:
                    if kind & _NEWLINES:
                        n = value.count("\n")
                        if n:
                            line += n
                            line_start = start + value.rindex("\n") + 1
                    if kind & _IGNORED:
                        continue
                    if kind & _KEYWORDS:
                        name = scanner.token_type(name, value)  # type: ignore[arg-type]  # as above
                if name in kept:
                    token = last = _new_str(Token, value)
                    token.type, token.value, token.start_pos = name, value, start
                    token.line, token.column, token.end_pos = start_line, column, pos
                    token.end_line, token.end_column = line, pos - line_start + 1
                else:
                    token = value
                is_end = False
            else:
                token = Token("$END", "", 0, 1, 1) if last is None else \
                    Token.new_borrow_pos("$END", "", last)
                name, is_end = "$END", True
            while True:
                action = actions[state_stack[-1]].get(name)  # type: ignore[arg-type]  # ditto
                if action is None:
                    return None
                if action.__class__ is int:
                    if is_end:
                        return None
                    state_stack.append(action)
                    value_stack.append(token)
                    if len(state_stack) > max_depth:
                        return None
                    break
                size, callback, origin = action  # type: ignore[misc]  # not int: a reduce
                if callback is None:  # the value stays; only the state below decides the goto
                    state_stack[-1] = goto = actions[state_stack[-2]][origin]  # type: ignore[assignment]  # a goto is an int
                else:
                    if size:
                        children = value_stack[-size:]
                        del state_stack[-size:]
                        del value_stack[-size:]
                    else:
                        children = []
                    value_stack.append(callback(children))
                    goto = actions[state_stack[-1]][origin]
                    state_stack.append(goto)  # type: ignore[arg-type]  # a goto is an int
                if is_end and goto == end_state:
                    return value_stack[-1]
