"""The names and shapes the agent relies on (see the policy brief): kept stable on purpose."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import policy
from gpuwarden.limit import memory_limit
from policy import (
    CompiledPolicy,
    Diagnostic,
    EffectiveRule,
    LoadResult,
    ResourceRequest,
    Severity,
    ViolationResponse,
    Workload,
    load_policy,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"


def test_load_policy_contract() -> None:
    result = load_policy([EXAMPLES])
    assert isinstance(result, LoadResult) and result.ok
    assert isinstance(result.policy, CompiledPolicy)
    assert isinstance(result.diagnostics, list)
    assert len(result.policy.digest) == 64 and int(result.policy.digest, 16) >= 0
    assert load_policy([EXAMPLES]).policy.digest == result.policy.digest


def test_workload_and_request_are_frozen_with_defaults() -> None:
    w = Workload()
    assert (w.namespace, w.name, w.container, w.node) == ("default", "", "", "")
    assert w.request == ResourceRequest(gpu=1, gpumem_mib=None, gpumem_percentage=None,
                                        gpucores=None, priority=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.namespace = "x"


def test_effective_rule_fields() -> None:
    p = load_policy([EXAMPLES]).policy
    assert p is not None
    e = p.evaluate(Workload(namespace="ml-train", labels={"team": "nlp"}))
    assert isinstance(e, EffectiveRule) and isinstance(e.on_violation, ViolationResponse)
    names = {f.name for f in dataclasses.fields(EffectiveRule)}
    assert names >= {"denied", "gpu", "gpumem_mib", "gpumem_percentage", "gpucores", "priority",
                     "core_policy", "mode", "on_violation", "compute_grace_seconds",
                     "bypass_tolerance_mib", "decided_by"}
    assert e.core_policy in ("default", "force", "disable") and e.mode in ("audit", "enforce")
    assert e.on_violation.action in ("alert", "terminate", "kill")
    assert e.on_violation.severity in ("info", "warning", "critical")
    assert (e.gpumem_mib is None) or (e.gpumem_percentage is None)
    assert memory_limit(e, 80 << 30).bytes == 20 << 30
    json.dumps(e.to_json())
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.gpu = 2
    assert isinstance(p.unmanaged, EffectiveRule)


def test_diagnostic_render_and_severity() -> None:
    result = policy.load_texts([("x.gwp", "version 1\ndefaults {\n  mode = strict\n}\n")])
    assert not result.ok and result.policy is None
    d = result.diagnostics[0]
    assert isinstance(d, Diagnostic) and d.severity is Severity.ERROR
    assert d.render().splitlines()[0] == "x.gwp:3:10: error[GW006]: invalid mode `strict`"
