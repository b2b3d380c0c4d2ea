"""The fast parser's lexer (one regular expression) cuts text exactly as the grammar's own
terminals do: Lark's patterns, read from the built parser, tried at each position with Lark's
rules (the %ignore whitespace skipped, the higher priority first, then the longest match;
keywords are words to the lexer, the parser decides).  Where no terminal matches, the fast
lexer gives up too."""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.fastparse import _tokens
from policy.parser import parser

SCALE = max(1, int(os.environ.get("GPUWARDEN_HYPOTHESIS_SCALE", "1")))
KEYWORDS_ARE_WORDS = {t.name for t in parser().terminals
                      if t.pattern.type == "str" and re.fullmatch(r"[a-z]+", t.pattern.value)}


def reference(source: str) -> tuple[list[str], list[int]] | None:
    terminals = [(t.priority, re.compile(t.pattern.to_regexp()))
                 for t in parser().terminals
                 if t.name not in KEYWORDS_ARE_WORDS and not t.name.startswith("__IGNORE")]
    ignore = re.compile(parser().get_terminal("__IGNORE_0").pattern.to_regexp())
    toks: list[str] = []
    ends: list[int] = []
    pos = 0
    while pos < len(source):
        skip = ignore.match(source, pos)
        if skip:
            pos = skip.end()
            if pos == len(source):
                return None  # trailing blanks with no token after them: a gap for _tokens
        found = [(prio, m.end() - pos, m.group()) for prio, pat in terminals
                 if (m := pat.match(source, pos)) and m.end() > pos]
        if not found:
            return None
        _, _, text = max(found)
        toks.append(text)
        pos += len(text)
        ends.append(pos)
    return toks, ends


ALPHABET = st.sampled_from([*"aZ_9.0%\"\\\n\r\t\f #=!~<,{}()[]-/é", "in", "1.5", "\r\n", '"x"'])


@given(st.lists(ALPHABET, max_size=40).map("".join))
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
          max_examples=2000 * SCALE)
def test_tokens_and_their_ends_are_the_grammar_s(text: str) -> None:
    source = text + "\n"
    mine = _tokens(source)
    expected = reference(source)
    if expected is None:
        assert mine is None
    else:
        assert mine is not None
        assert (mine[0][:-1], mine[1]) == expected  # mine ends with the end-of-input marker
