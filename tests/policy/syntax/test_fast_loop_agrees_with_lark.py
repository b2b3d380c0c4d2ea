"""The fast loop (policy.lalr: Lark's own tables and terminals, driven in one loop) builds
exactly what Lark builds: the same tree with the same spans for every input Lark accepts, and
nothing for every input Lark rejects, which then goes to Lark for its diagnostics.  Only input
nested deeper than the loop's stack limit is left to Lark although it may parse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import ast
from policy.parser import MAX_DEPTH, _parse_fast, parse, parse_with_lark

REPO = Path(__file__).resolve().parents[3]
SCALE = max(1, int(os.environ.get("GPUWARDEN_HYPOTHESIS_SCALE", "1")))
settings.register_profile("fastloop", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])


def fast(text: str) -> list[ast.Item] | None:
    return _parse_fast(text if text.endswith("\n") else text + "\n", "f.gwp")


def agree(text: str) -> bool:
    """Assert the fast loop agrees with Lark on `text`; return whether Lark accepts it."""
    mine = fast(text)
    reference, error = parse_with_lark(text, "f.gwp")
    if mine is None:
        assert error is not None, f"declined what Lark accepts: {text!r}"
        return False
    assert error is None, f"fast loop accepted what Lark rejects: {text!r}\n{error}"
    assert mine == reference, f"different trees for {text!r}"
    return True


# ---- the policies of this repository, and the benchmark's


def repo_policies() -> list[Path]:
    return sorted(p for p in REPO.rglob("*.gwp") if ".venv" not in p.parts)


@pytest.mark.parametrize("path", repo_policies(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_policy_of_the_repository_parses_as_lark_parses_it(path: Path) -> None:
    assert agree(path.read_text("utf-8")), "Lark rejects a policy of the repository"


def test_the_benchmark_policy_parses_as_lark_parses_it() -> None:
    import sys

    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    from bench_policy import policy_text

    assert agree(policy_text(200, scanned=20, by_label=30))


def test_parse_returns_the_same_module_either_way() -> None:
    text = 'version 1\nrule "a" {\n  match namespace == "x"\n  mode = audit\n}\n'
    module, diags = parse(text, "f.gwp")
    items, error = parse_with_lark(text, "f.gwp")
    assert not diags and error is None and module is not None
    assert module.items == tuple(items or ())


# ---- layout: comments, blank lines, CRLF, tabs, form feeds, wrapped expressions and lists

SP = st.sampled_from([" ", "  ", "\t", " \f "])
OPT_SP = st.sampled_from(["", " ", "\t"])
NL = st.sampled_from(["\n", "\n\n", "  # c\n", "\n# whole line\n", "\r\n", "\n\t\n"])
WORDS = st.sampled_from(["gpu", "mode", "x", "app.kubernetes.io/name", "a-b", "_z", "deny",
                         "rule", "in", "and", "or", "not", "has", "match", "version"])
STRINGS = st.sampled_from(['"a"', '""', '"x y"', '"q\\"uote"', '"#no comment"', '"back\\\\"'])
VALUES = st.one_of(WORDS, STRINGS, st.sampled_from(["1", "2.5", "4GiB", "50%", "10s", "1e5"]))


@st.composite
def exprs(draw: st.DrawFn, depth: int = 0) -> str:
    sp = draw(SP)
    choice = draw(st.integers(0, 6 if depth < 3 else 3))
    field = draw(st.sampled_from(["namespace", "label team", 'label "a b"', "node_label k",
                                  "name", "label in", "annotation x.y/z"]))
    if choice == 0:
        return f"{field}{sp}{draw(st.sampled_from(['==', '!=', '=~', '!~']))}{draw(OPT_SP)}" \
               f"{draw(STRINGS)}"
    if choice == 1:
        items = draw(st.lists(STRINGS, max_size=3))
        seps = [draw(st.sampled_from([",", ", ", ",\n  ", " ,"])) for _ in items]
        body = "".join(i + s for i, s in zip(items, seps, strict=True))
        if body and draw(st.booleans()):
            body = body.rstrip(" ,\n")  # no trailing comma
        op = draw(st.sampled_from(["in", "not in", "not  in"]))
        return f"{field} {op} [{draw(st.sampled_from(['', chr(10)]))}{body}]"
    if choice == 2:
        return f"has{sp}{field}"
    if choice == 3:
        return f"not{sp}{draw(exprs(depth + 1))}"
    if choice == 4:
        inner = draw(exprs(depth + 1))
        return f"({draw(st.sampled_from(['', chr(10), ' ']))}{inner}" \
               f"{draw(st.sampled_from(['', chr(10), ' ']))})"
    joiner = draw(st.sampled_from(["and", "or"]))
    brk = draw(st.sampled_from(["", "\n   ", " # why\n "]))
    return f"{draw(exprs(depth + 1))}{sp}{joiner}{brk}{sp}{draw(exprs(depth + 1))}"


@st.composite
def statements(draw: st.DrawFn) -> str:
    sp = draw(SP)
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return f"match{sp}{draw(exprs())}"
    if kind == 1:
        parts = [f"{draw(WORDS)}{draw(OPT_SP)}={draw(OPT_SP)}{draw(VALUES)}"
                 for _ in range(draw(st.integers(1, 3)))]
        return f"default{sp}" + draw(st.sampled_from([",", ", ", " , "])).join(parts)
    if kind == 2:
        parts = [f"{draw(WORDS)}{draw(OPT_SP)}<={draw(OPT_SP)}{draw(VALUES)}"
                 for _ in range(draw(st.integers(1, 3)))]
        tail = draw(st.sampled_from(["", " clamp", " deny", " x"]))
        return f"cap{sp}" + ", ".join(parts) + tail
    if kind == 3:
        return "deny" + draw(st.sampled_from(["", " " + draw(STRINGS)]))
    if kind == 4:
        return "allow"
    values = " ".join(draw(st.lists(VALUES, min_size=1, max_size=4)))
    eq = draw(st.sampled_from([" = ", "=", " "]))
    return f"{draw(WORDS.filter(lambda w: w not in ('deny', 'match')))}{eq}{values}"


@st.composite
def layouts(draw: st.DrawFn) -> str:
    out = [draw(st.sampled_from(["", "# head\n", "\n", "  "])) + "version 1" + draw(NL)]
    for i in range(draw(st.integers(0, 3))):
        head = draw(st.sampled_from([f'rule "r{i}"', "defaults", "unmanaged", f'rule"r{i}"']))
        body = "".join("  " + draw(statements()) + draw(NL)
                       for _ in range(draw(st.integers(0, 3))))
        out.append(f"{head}{draw(OPT_SP)}{{{draw(NL)}{body}}}{draw(NL)}")
    if draw(st.booleans()):
        out.append('include "other.gwp"\n')
    return "".join(out)


@given(layouts())
@settings(settings.get_profile("fastloop"), max_examples=400 * SCALE)
def test_generated_policies_parse_alike(text: str) -> None:
    agree(text)


# ---- token soup: the fast loop takes what Lark takes, with the same tree, and nothing else

SOUP = ["version", "1", "include", '"x.gwp"', "defaults", "unmanaged", "rule", '"r"', "{", "}",
        "match", "default", "cap", "deny", "allow", "gpumem", "=", "<=", "==", "!=", "=~",
        "in", "not", "and", "or", "has", "label", "namespace", "[", "]", ",", "(", ")",
        "4GiB", "50%", "10s", "1.5", "\n", "\n", "\n", "#c\n", "\r\n", "\r", "\f", "\t", "é",
        '"', "notin", "andx", "version1", "rulex", "not-x", "1e5", "clamp", "x"]


@given(st.lists(st.sampled_from(SOUP), max_size=60).map(" ".join))
@settings(settings.get_profile("fastloop"), max_examples=1500 * SCALE)
def test_token_soup_parses_alike(text: str) -> None:
    agree(text)


@given(st.lists(st.sampled_from(SOUP), max_size=60).map("".join))
@settings(settings.get_profile("fastloop"), max_examples=800 * SCALE)
def test_token_soup_without_spaces_parses_alike(text: str) -> None:
    agree(text)


# ---- every keyword (and keyword-like word) in every position a word can take

KEYWORDS = ["version", "include", "defaults", "unmanaged", "rule", "match", "default", "cap",
            "deny", "allow", "not", "has", "in", "and", "or"]
SLOT_WORDS = [*KEYWORDS, "x", "notin", "andx", "orx", "inx", "hasx", "version1", "rulex",
              "matchx", "not-x", "and.x", "deny/x", "_", "AND", "Not"]
TEMPLATES = [
    'version 1\nrule "r" {\n  W = 1\n}\n',
    'version 1\nrule "r" {\n  W\n}\n',
    'version 1\nrule "r" {\n  priority = W\n}\n',
    'version 1\nrule "r" {\n  priority W\n}\n',
    'version 1\nrule "r" {\n  on_violation = kill after 5s alert W severity W\n}\n',
    'version 1\nrule "r" {\n  default W = 1\n}\n',
    'version 1\nrule "r" {\n  default gpu = 1, W = W\n}\n',
    'version 1\nrule "r" {\n  cap W <= 1\n}\n',
    'version 1\nrule "r" {\n  cap gpu <= 1 W\n}\n',
    'version 1\nrule "r" {\n  cap gpu <= W, W <= 2\n}\n',
    'version 1\nrule "r" {\n  deny W\n}\n',
    'version 1\nrule "r" {\n  match W == "a"\n}\n',
    'version 1\nrule "r" {\n  match label W == "a"\n}\n',
    'version 1\nrule "r" {\n  match has W\n}\n',
    'version 1\nrule "r" {\n  match has label W\n}\n',
    'version 1\nrule "r" {\n  match has label W or name == "n"\n}\n',
    'version 1\nrule "r" {\n  match label W in ["a"]\n}\n',
    'version 1\nrule "r" {\n  match label a W ["a"]\n}\n',
    'version 1\nrule "r" {\n  match label a not W ["a"]\n}\n',
    'version 1\nrule "r" {\n  match label a == "b" W name == "c"\n}\n',
    'version 1\nrule "r" {\n  match name == "b" W\n    name == "c"\n}\n',
    'version 1\nrule "r" {\n  match not W == "a"\n}\n',
    'version 1\nrule "r" {\n  match (W == "a")\n}\n',
    'version 1\nrule "r" {\n  match (name == "a" W)\n}\n',
    'W 1\nrule "r" {\n  allow\n}\n',
    'version 1\nW "r" {\n  allow\n}\n',
    'version 1\nW {\n  mode = audit\n}\n',
    'version 1\nrule "r" {\n  allow\n}\nW\n',
    'version 1\nW "x.gwp"\n',
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_word_in_every_position_parses_alike(template: str) -> None:
    for word in SLOT_WORDS:
        agree(template.replace("W", word))


# ---- nesting: deep input goes to Lark, which applies its own limit (GW021)


@pytest.mark.parametrize("depth", [MAX_DEPTH // 4, MAX_DEPTH - 1, MAX_DEPTH + 1])
def test_deep_nesting_is_left_to_lark(depth: int) -> None:
    for expr in ("(" * depth + 'name == "a"' + ")" * depth, "not " * depth + 'name == "a"'):
        text = f'version 1\nrule "r" {{\n  match {expr}\n}}\n'
        if depth <= MAX_DEPTH // 4:
            assert agree(text)
        elif depth > MAX_DEPTH:
            assert fast(text) is None
        module, diags = parse(text, "f.gwp")
        assert (module is None) == (depth > MAX_DEPTH)
        assert [d.code for d in diags] == (["GW021"] if depth > MAX_DEPTH else [])
