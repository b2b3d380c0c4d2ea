"""Match semantics: fields, operators, label-selector treatment of absent keys, precedence of
not / and / or, anchored regexes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from policy import CompiledPolicy, Workload


def matches(compile_ok: Callable[[str], CompiledPolicy], expr: str, w: Workload) -> bool:
    p = compile_ok(f'version 1\nrule "r" {{\n  match {expr}\n  mode = audit\n}}\n')
    return p.evaluate(w).matched_rules == ("r",)


W = Workload(namespace="ml-train", name="resnet", container="trainer", node="gpu-7",
             labels={"team": "vision", "app.kubernetes.io/name": "resnet"},
             annotations={"gpuwarden.io/burst": "yes"},
             node_labels={"nvidia.com/gpu.product": "NVIDIA-H200"})


@pytest.mark.parametrize("expr, expected", [
    ('namespace == "ml-train"', True),
    ('namespace != "ml-train"', False),
    ('name == "resnet" and container == "trainer" and node == "gpu-7"', True),
    ('label team == "vision"', True),
    ('label "app.kubernetes.io/name" == "resnet"', True),
    ("label app.kubernetes.io/name == \"resnet\"", True),
    ('annotation "gpuwarden.io/burst" == "yes"', True),
    ('node_label "nvidia.com/gpu.product" =~ ".*H200"', True),
    # regexes are anchored: a partial match is not a match
    ('namespace =~ "ml"', False),
    ('namespace =~ "ml-.*"', True),
    ('namespace !~ "ml-.*"', False),
    ('label team in ["nlp", "vision"]', True),
    ('label team not in ["nlp", "vision"]', False),
    ("has label team", True),
    ("not has label team", False),
    # absent keys: ==, =~, in are false; !=, !~, not in are true (label-selector semantics)
    ('label tier == "x"', False),
    ('label tier != "x"', True),
    ('label tier =~ ".*"', False),
    ('label tier !~ "x"', True),
    ('label tier in ["x"]', False),
    ('label tier not in ["x"]', True),
    ("has label tier", False),
    # not > and > or
    ('namespace == "x" and label team == "y" or name == "resnet"', True),
    ('namespace == "x" and (label team == "y" or name == "resnet")', False),
    ('not namespace == "x" and name == "resnet"', True),
    ('not (namespace == "ml-train" and name == "resnet")', False),
    ('namespace == "a" or\n      namespace == "ml-train"', True),
    ('label team in [\n    "a",\n    "vision",\n  ]', True),
    ('label team in []', False),
])
def test_match(compile_ok: Callable[[str], CompiledPolicy], expr: str, expected: bool) -> None:
    assert matches(compile_ok, expr, W) is expected


def test_no_match_line_matches_everything(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok('version 1\nrule "all" {\n  mode = audit\n}\n')
    assert p.evaluate(Workload(namespace="anything")).matched_rules == ("all",)


def test_string_escapes(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    assert matches(compile_ok, r'label q == "a\"b\\c"', Workload(labels={"q": 'a"b\\c'}))
