"""--dry-run and audit-mode rules record "would kill" (dry actions); protected PIDs are never
among the signalled ones, and a workload made only of protected PIDs gets an alert only."""

from __future__ import annotations

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import decide
from agent.model import ActionKind, Mode, Pid


def over(**kw: object) -> object:
    return workload(pids=(100, 101), shim={100: {GPU: 1500 * MiB}}, r=rule(grace_seconds=0, **kw))


def test_dry_run_marks_every_action_dry() -> None:
    acts = decide(snap(over()), policy(dry_run=True), 0.0)
    assert [(str(a.kind), a.dry) for a in acts] == [("alert", True), ("kill", True)]


def test_audit_mode_rule_is_dry_even_without_dry_run() -> None:
    acts = decide(snap(over(mode=Mode.AUDIT)), policy(), 0.0)
    assert all(a.dry for a in acts) and ActionKind.KILL in {a.kind for a in acts}


def test_protected_pids_are_spared() -> None:
    acts = decide(snap(over()), policy(protected=frozenset({Pid(101)})), 0.0)
    kill = next(a for a in acts if a.kind == ActionKind.KILL)
    assert kill.pids == (100,) and kill.protected == (101,)


def test_all_protected_means_alert_only() -> None:
    acts = decide(snap(over()), policy(protected=frozenset({Pid(100), Pid(101)})),
                  0.0)
    assert [str(a.kind) for a in acts] == ["alert"]
