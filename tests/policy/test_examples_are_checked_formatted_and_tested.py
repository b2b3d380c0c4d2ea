"""The shipped examples: the policy set loads without errors or warnings, is in fmt's layout,
its test suite passes, and every example pod can be explained."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuwarden.cli import main
from policy import load_policy
from policy.fmt import format_source
from policy.pods import workloads_from_manifest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "policies"
PODS = sorted((REPO / "examples" / "pods").glob("*.yaml"))


def test_examples_load_clean() -> None:
    result = load_policy([EXAMPLES])
    assert result.ok and result.diagnostics == [], [d.render() for d in result.diagnostics]
    assert len(result.files) >= 4 and len(result.policy.rules) >= 8


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.gwp")), ids=lambda p: p.name)
def test_examples_are_formatted(path: Path) -> None:
    text = path.read_text()
    assert format_source(text, str(path))[0] == text


def test_example_suite_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["policy", "test", str(EXAMPLES / "tests")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert " 0 failed" in out


@pytest.mark.parametrize("pod", PODS, ids=lambda p: p.name)
def test_example_pods_explain(pod: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["policy", "explain", str(EXAMPLES), str(pod)])
    out = capsys.readouterr().out
    assert (code, "DENIED" in out) in ((0, False), (1, True)) and ("ALLOWED" in out or code)
    policy = load_policy([EXAMPLES]).policy
    assert policy is not None
    for doc in yaml.safe_load_all(pod.read_text()):
        for pw in workloads_from_manifest(doc, str(pod), gpu_only=True):
            effective = policy.evaluate(pw.workload)
            assert set(effective.decided_by) >= {"gpu", "gpumem", "gpucores", "priority", "mode"}
