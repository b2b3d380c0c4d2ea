"""Violation and action counters of a workload that ended are dropped after the retention, so
the exporter's series end like an ended pod's; a live workload's, or one that comes back under
the same key in time, keep counting."""

from __future__ import annotations

import io

from agent.audit import AuditLog
from agent.enforce import COUNTER_RETENTION_S, Enforcer
from agent.model import (
    Action,
    ActionKind,
    GpuUuid,
    Verdict,
    VerdictKind,
    ViolationLabels,
    WorkloadKey,
)

GONE, LIVE, BACK = WorkloadKey("ns", "gone"), WorkloadKey("ns", "live"), WorkloadKey("ns", "back")


def alert(key: WorkloadKey) -> Action:
    v = Verdict(kind=VerdictKind.MEMORY, wid=key.pod, key=key, gpu=GpuUuid("GPU-1"), rule="r",
                measured={}, limit=1, detail="", sources=("shim",))
    return Action(ActionKind.ALERT, key.pod, key, (), v, dry=True, reason="a", severity="info",
                  policy_rule="r")


def test_only_workloads_gone_for_the_retention_lose_their_counters() -> None:
    enf = Enforcer(AuditLog(None, io.StringIO()), {}.get)
    enf.apply([alert(GONE), alert(LIVE), alert(BACK)], 0.0)
    assert len(enf.violations) == 3
    enf.prune([LIVE], COUNTER_RETENTION_S / 2)
    enf.prune([LIVE, BACK], COUNTER_RETENTION_S)  # BACK returns before its retention ends
    enf.prune([LIVE], COUNTER_RETENTION_S + 1)
    assert {k[0] for k in enf.violations} == {LIVE, BACK}
    assert {k[0] for k in enf.actions} == {LIVE, BACK}
    enf.prune([LIVE], 2 * COUNTER_RETENTION_S + 1)
    assert {k[0] for k in enf.violations} == {LIVE}
    assert enf.violations[ViolationLabels(LIVE, "GPU-1", "memory", "r", "a", "info")] == 1
