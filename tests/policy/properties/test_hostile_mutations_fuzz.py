"""Fuzz of the policy language by mutation (hypothesis, bounded): the example policies with
hostile pieces spliced in at random places (numbers of thousands of digits, names and strings
of 100 kB, regex repetitions too large for `re`, deep nesting, NUL and control characters).
Whatever comes out, loading ends in diagnostics (never an exception) quickly, each with a line
and column and a bounded rendering."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import load_texts

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "policies").rglob("*.gwp"))
SEEDS = [p.read_text() for p in EXAMPLES]

HOSTILE = [
    "9" * 5000, "1" + "0" * 400 + "GiB", "1e999999", "-" + "9" * 50 + "%", "0x" + "f" * 64,
    "k" * 100_000, '"' + "s" * 100_000 + '"', '"a{99999999999}"', '"(((((a)))))" ' * 50,
    '"' + "(" * 5000 + '"', "(" * 1000 + "x" + ")" * 1000, "not " * 1000, "\x00", "\x1b[2J",
    "\r", "\t", "\u2028", "\ufeff", "é" * 1000, "{" * 500, "}" * 500, "[" * 500,
    'include "**/**/**/*.gwp"', 'include "/dev/zero"', "weight = " + "9" * 5000,
    '=~ "a{1000000}{1000000}"', "==", "=~", "in [", "version 99999999999999999999",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 12))  # replace what was there (a value, a keyword), or not
        piece = draw(st.sampled_from(HOSTILE))
        text = text[:at] + piece + text[at + cut:]
    return text


@settings(max_examples=120, deadline=1500, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=mutated())
def test_mutated_policy_ends_in_bounded_diagnostics(text: str) -> None:
    result = load_texts([("f.gwp", text)])
    assert result.ok or result.errors
    for d in result.diagnostics:
        assert d.span.line >= 1 and d.span.col >= 1
        assert len(d.render()) < 4000, d.render()[:300]


def test_the_seeds_are_the_example_policies() -> None:
    assert len(SEEDS) >= 3 and any(load_texts([("f.gwp", s)]).ok for s in SEEDS)
