"""Golden files: input.gwp -> formatted.gwp (fmt) -> explained.txt (explain of pod.yaml).

Set GPUWARDEN_UPDATE_GOLDEN=1 to rewrite the expected files after an intended change, then
review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from policy import load_texts
from policy.explain import explain_workload, render_explanation
from policy.fmt import format_source
from policy.pods import workloads_from_manifest

HERE = Path(__file__).parent
CASES = sorted(p.name for p in HERE.iterdir() if (p / "input.gwp").exists())
UPDATE = os.environ.get("GPUWARDEN_UPDATE_GOLDEN") == "1"


def check(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"{path} is missing; run with GPUWARDEN_UPDATE_GOLDEN=1"
    assert actual == path.read_text()


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    d = HERE / case
    source = (d / "input.gwp").read_text()
    formatted, diags = format_source(source, "input.gwp")
    assert formatted is not None, [x.render() for x in diags]
    check(d / "formatted.gwp", formatted)
    assert format_source(formatted, "input.gwp")[0] == formatted
    original = load_texts([("input.gwp", source)])
    result = load_texts([("input.gwp", formatted)])
    assert original.policy is not None and result.policy is not None
    assert result.policy.digest == original.policy.digest
    manifest = yaml.safe_load((d / "pod.yaml").read_text())
    pods = workloads_from_manifest(manifest, "pod.yaml", gpu_only=True)
    report = {"source": "pod.yaml", "namespace": pods[0].workload.namespace,
              "name": pods[0].workload.name,
              "containers": [explain_workload(result.policy, p.workload, init=p.init,
                                              uses_gpu=p.uses_gpu) for p in pods]}
    check(d / "explained.txt", render_explanation([report], result.policy.digest))
