"""A memory violation is alerted once, terminated, and killed only after the rule's grace; a
kill with no grace is immediate; a violation that ends is forgotten."""

from __future__ import annotations

from dataclasses import replace

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import decide, remember
from agent.model import ActionKind, Response, VerdictKind


def kinds(actions: list) -> list[str]:
    return [str(a.kind) for a in actions]


def test_within_limits_gives_no_action() -> None:
    w = workload(shim={100: {GPU: 500 * MiB}})
    s = snap(w, ebpf={100: {GPU: 500 * MiB}}, nvml={100: {GPU: 540 * MiB}})
    assert decide(s, policy(), now=0.0) == []


def test_over_memory_alert_terminate_then_kill_after_grace() -> None:
    w = workload(shim={100: {GPU: 1200 * MiB}}, r=rule(grace_seconds=10.0))
    s0 = snap(w, ebpf={100: {GPU: 1200 * MiB}})
    pol = policy()
    a0 = decide(s0, pol, now=100.0)
    assert kinds(a0) == ["alert", "terminate"]
    assert a0[0].verdict is not None and a0[0].verdict.kind == VerdictKind.MEMORY
    assert a0[0].verdict.measured["shim"] == 1200 * MiB
    h1 = remember(s0, pol, a0, now=100.0)
    s1 = replace(s0, history=h1)
    assert decide(s1, pol, now=105.0) == []  # inside the grace: nothing new
    a2 = decide(s1, pol, now=110.0)
    assert kinds(a2) == ["kill"] and a2[0].pids == (100,)
    h3 = remember(s1, pol, a2, now=110.0)
    assert decide(replace(s0, history=h3), pol, now=200.0) == []  # killed once only


def test_kill_with_no_grace_is_immediate() -> None:
    w = workload(shim={100: {GPU: 1200 * MiB}}, r=rule(grace_seconds=0.0))
    assert kinds(decide(snap(w), policy(), now=0.0)) == ["alert", "kill"]


def test_alert_only_rule_never_signals() -> None:
    w = workload(shim={100: {GPU: 1200 * MiB}}, r=rule(response=Response.ALERT))
    assert kinds(decide(snap(w), policy(), now=0.0)) == ["alert"]


def test_resolved_violation_is_forgotten_and_realerted_later() -> None:
    pol = policy()
    over = snap(workload(shim={100: {GPU: 1200 * MiB}}, r=rule(response=Response.ALERT)))
    h = remember(over, pol, decide(over, pol, 0.0), 0.0)
    assert len(h) == 1
    ok = replace(snap(workload(shim={100: {GPU: 10 * MiB}}, r=rule(response=Response.ALERT))),
                 history=h)
    assert remember(ok, pol, decide(ok, pol, 1.0), 1.0) == {}
    again = replace(over, history={})
    assert kinds(decide(again, pol, 2.0)) == ["alert"]


def test_ebpf_and_nvml_get_the_tolerance_but_the_shim_does_not() -> None:
    w = workload(shim={100: {GPU: 1000 * MiB}}, r=rule(response=Response.ALERT))
    # 1000 MiB + 60 MiB context seen by NVML: inside the 64 MiB tolerance
    assert decide(snap(w, nvml={100: {GPU: 1060 * MiB}}), policy(), 0.0) == []
    over = decide(snap(w, nvml={100: {GPU: 1070 * MiB}}), policy(), 0.0)
    assert {a.verdict.kind for a in over if a.verdict} == {VerdictKind.MEMORY,
                                                          VerdictKind.BYPASS}
    assert kinds(decide(snap(workload(shim={100: {GPU: 1000 * MiB + 1}})), policy(), 0.0)) \
        == ["alert", "terminate"]


def test_one_kill_per_workload_even_with_several_verdicts() -> None:
    w = workload(pids=(100, 101), shim={100: {GPU: 2000 * MiB}}, r=rule(grace_seconds=0))
    acts = decide(snap(w, ebpf={100: {GPU: 2000 * MiB}, 101: {GPU: 5 * MiB}}), policy(), 0.0)
    assert kinds(acts).count("kill") == 1
    kill = next(a for a in acts if a.kind == ActionKind.KILL)
    assert kill.pids == (100, 101)
