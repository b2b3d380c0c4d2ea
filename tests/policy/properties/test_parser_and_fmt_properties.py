"""Properties: any input gives diagnostics, never an exception; fmt is idempotent and keeps the
meaning (same digest, same evaluation); the index finds exactly the rules a full scan finds."""

from __future__ import annotations

import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import ResourceRequest, Workload, load_texts
from policy.fmt import format_source
from policy.parser import parse

TOKENS = ["version", "1", "2", "include", '"x.gwp"', "defaults", "unmanaged", "rule", '"r"',
          "{", "}", "match", "default", "cap", "deny", "allow", "gpumem", "gpucores", "gpu",
          "=", "<=", "==", "!=", "=~", "!~", "in", "not", "and", "or", "has", "label",
          "namespace", "[", "]", ",", "(", ")", "4GiB", "50%", "10s", "kill", "after", "alert",
          "severity", "#c", "\n", "\n", " ", '"', "\\", "clamp", "weight", "mode", "audit",
          "priority", "high", "0", "1.5", "é", "\t", "\r\n", '"a\\"b"', "whole"]

# GPUWARDEN_HYPOTHESIS_SCALE=10 runs ten times as many examples (a deeper, slower search).
SCALE = max(1, int(os.environ.get("GPUWARDEN_HYPOTHESIS_SCALE", "1")))

settings.register_profile("policy", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("policy")


@given(st.text(max_size=400))
@settings(max_examples=400 * SCALE)
def test_arbitrary_text_never_raises(text: str) -> None:
    result = load_texts([("f.gwp", text)])
    assert result.ok or result.errors
    for d in result.diagnostics:
        assert d.span.line >= 1 and d.span.col >= 1
        d.render()


@given(st.lists(st.sampled_from(TOKENS), max_size=80).map(" ".join))
@settings(max_examples=600 * SCALE)
def test_token_soup_never_raises(text: str) -> None:
    module, diags = parse(text, "f.gwp")
    assert (module is None) == bool(diags)
    result = load_texts([("f.gwp", text)])
    assert result.ok or result.errors
    if module is not None:
        formatted, _ = format_source(text, "f.gwp")
        assert formatted is not None
        assert format_source(formatted, "f.gwp")[0] == formatted


# ---- generated valid policies

NAMES = st.sampled_from(["a", "b", "ml-train", "serving", "notebook-x", "kube-system", ""])
KEYS = st.sampled_from(["team", "tier", "app.kubernetes.io/name", "gpuwarden.io/x", "in"])
VALUES = st.sampled_from(["a", "b", "vision", "x y", 'q"uote', "back\\slash", ""])
REGEXES = st.sampled_from(["a.*", "notebook-[a-z]+", ".*", "(a|b)", "x?"])


def q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def fields(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["namespace", "name", "container", "node", "label",
                                 "annotation", "node_label"]))
    if kind in ("label", "annotation", "node_label"):
        key = draw(KEYS)
        return f"{kind} {q(key)}" if key == "in" or draw(st.booleans()) else f"{kind} {key}"
    return kind


@st.composite
def atoms(draw: st.DrawFn) -> str:
    f = draw(fields())
    op = draw(st.sampled_from(["==", "!=", "=~", "!~", "in", "not in", "has"]))
    if op == "has":
        key = draw(KEYS)
        return f"has label {q(key)}"
    if op in ("=~", "!~"):
        return f"{f} {op} {q(draw(REGEXES))}"
    if op in ("in", "not in"):
        items = draw(st.lists(VALUES, max_size=3))
        return f"{f} {op} [{', '.join(q(v) for v in items)}]"
    return f"{f} {op} {q(draw(VALUES))}"


EXPRS = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" and ", " or ", " and\n    ", " or\n "]), inner)
        .map("".join),
        inner.map(lambda e: f"not ({e})"),
        inner.map(lambda e: f"( {e} )"),
    ),
    max_leaves=8,
)

# (statement, the slots it sets): a rule may set each slot once
STATEMENTS = st.sampled_from([
    ("default gpumem = 4GiB", {"dm"}), ("default gpumem=25%, gpucores = 20%", {"dm", "dc"}),
    ("cap gpumem <= 8GiB deny", {"cm"}), ("cap gpucores<=50% , gpu <= 2", {"cc", "cg"}),
    ("priority high", {"p"}), ("priority = low", {"p"}), ("mode audit", {"m"}),
    ("core_policy = force", {"cp"}), ("on_violation = kill after 10s", {"v"}),
    ('on_violation = alert "X" severity info', {"v"}), ("compute_grace = 2m", {"g"}),
    ("bypass_tolerance = 1GiB", {"b"}), ("weight = 3", {"w"}), ('deny "nope"', {"a"}),
    ("allow", {"a"}), ("default priority = high", {"dp"}),
])


@st.composite
def policies(draw: st.DrawFn) -> str:
    out = [draw(st.sampled_from(["", "# head\n", "\n\n"])) + "version 1"]
    if draw(st.booleans()):
        out.append("defaults {\n  gpumem = 5000MiB  # d\n  mode = enforce\n}")
    if draw(st.booleans()):
        out.append("unmanaged {\n  on_violation = kill after 5s\n}")
    for i in range(draw(st.integers(0, 5))):
        body = []
        if draw(st.booleans()):
            body.append("match " + draw(EXPRS))
        used: set[str] = set()
        for stmt, slots in draw(st.lists(STATEMENTS, min_size=1, max_size=4)):
            if used & slots:
                continue
            used |= slots
            body.append(stmt + draw(st.sampled_from(["", "  # trailing"])))
        sep = draw(st.sampled_from(["\n  ", "\n\n  ", "\n      "]))
        out.append(f'rule "r{i}" {{{sep}' + sep.join(body) + "\n}")
    return draw(st.sampled_from(["\n", "\n\n", "\n# between\n"])).join(out) + "\n"


WORKLOADS = st.builds(
    Workload,
    namespace=NAMES, name=NAMES, container=NAMES, node=NAMES,
    labels=st.dictionaries(KEYS, VALUES, max_size=3),
    annotations=st.dictionaries(KEYS, VALUES, max_size=2),
    node_labels=st.dictionaries(KEYS, VALUES, max_size=2),
    request=st.builds(ResourceRequest, gpu=st.sampled_from([None, 1, 3]),
                      gpumem_mib=st.sampled_from([None, 1000, 20000]),
                      gpucores=st.sampled_from([None, 0, 30, 90]),
                      priority=st.sampled_from([None, 0, 1])),
)


@given(policies(), st.lists(WORKLOADS, max_size=4))
@settings(max_examples=300 * SCALE)
def test_fmt_is_idempotent_and_meaning_preserving(text: str, workloads: list[Workload]) -> None:
    original = load_texts([("p.gwp", text)])
    assert original.policy is not None, [d.render() for d in original.errors]
    formatted, _ = format_source(text, "p.gwp")
    assert formatted is not None
    assert format_source(formatted, "p.gwp")[0] == formatted
    again = load_texts([("p.gwp", formatted)])
    assert again.policy is not None, [d.render() for d in again.errors]
    assert again.policy.digest == original.policy.digest
    assert [d.code for d in again.diagnostics] == [d.code for d in original.diagnostics]
    for w in workloads:
        a, b = original.policy.evaluate(w).to_json(), again.policy.evaluate(w).to_json()
        assert a == b


@given(policies(), st.lists(WORKLOADS, min_size=1, max_size=6))
@settings(max_examples=300 * SCALE)
def test_index_finds_what_a_scan_finds(text: str, workloads: list[Workload]) -> None:
    policy = load_texts([("p.gwp", text)]).policy
    assert policy is not None
    for w in workloads:
        scanned = sorted((r for r in policy.rules if r.matches(w)),
                         key=lambda r: (r.weight, r.order), reverse=True)
        assert [r.name for r in policy.matching(w)] == [r.name for r in scanned]


@given(st.text(alphabet=string.printable, max_size=60))
def test_comment_and_string_scanner_agree_with_parser(text: str) -> None:
    line = text.replace("\n", " ").replace("\r", " ")
    module, _ = parse(f'version 1\nrule "x" {{\n  match name == "{line}"\n}}\n', "f.gwp")
    if module is not None:
        source = f'version 1\nrule "x" {{\n  match name == "a"  # {line}\n}}\n'
        formatted, _ = format_source(source, "f.gwp")
        assert formatted is not None and f"# {line}".rstrip() in formatted
