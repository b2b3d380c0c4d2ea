"""Compute share: acted on only after the rule's compute grace, and only where the workload is
core-limited (priority coordination). Where every workload's shims see the node region they
coordinate themselves: no override, and under `default` no cap to judge. Unmanaged GPU processes
follow the unmanaged rule."""

from __future__ import annotations

from dataclasses import replace

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import core_plan, decide, judge, remember
from agent.model import Pid, Response, VerdictKind


def sharing(prio_a: str, prio_b: str, node_region: bool = False,
            policy_a: str = "default") -> tuple:
    """Two workloads on GPU, each at gpucores 30; by default their shims see no node region
    (the agent coordinates them)."""
    a = workload("a", (1,), rule(cores_percent=30, priority=prio_a, compute_grace_seconds=5,
                                 response=Response.ALERT, core_policy=policy_a),
                 shim={1: {GPU: MiB}}, node_region=node_region)
    b = workload("b", (2,), rule(cores_percent=30, priority=prio_b), shim={2: {GPU: MiB}},
                 node_region=node_region)
    return a, b


def test_compute_over_share_waits_for_the_grace() -> None:
    a, b = sharing("low", "low")
    s = snap(a, b, sm={1: {GPU: 0.8}, 2: {GPU: 0.1}})
    pol = policy()
    assert decide(s, pol, 0.0) == []
    h = remember(s, pol, [], 0.0)
    assert decide(replace(s, history=h), pol, 4.9) == []
    acts = decide(replace(s, history=h), pol, 5.0)
    assert [a.verdict.kind for a in acts if a.verdict] == [VerdictKind.COMPUTE]


def test_high_priority_sharing_only_with_high_is_not_limited() -> None:
    a, b = sharing("high", "high")
    assert judge(snap(a, b, sm={1: {GPU: 0.9}}), policy()) == []


def test_alone_is_not_limited() -> None:
    a, _ = sharing("low", "low")
    assert judge(snap(a, sm={1: {GPU: 0.9}}), policy()) == []


def test_core_plan_low_yields_to_high() -> None:
    a, b = sharing("low", "high")
    plan = core_plan({GPU: [a, b]})
    assert plan[("a", GPU)].yield_to_high and plan[("a", GPU)].effective_cores_percent == 30
    assert not plan[("b", GPU)].yield_to_high
    solo = core_plan({GPU: [a]})
    assert solo[("a", GPU)].effective_cores_percent == 0


def test_shims_that_see_the_node_region_coordinate_themselves() -> None:
    # no override (a yield from the agent would stop the low one for as long as the high one
    # holds memory; a cap would undo shares as weights), and no cap to judge under `default`
    a, b = sharing("low", "high", node_region=True)
    plan = core_plan({GPU: [a, b]})
    assert all(not p.override and p.cap_percent == 0 for p in plan.values()), plan
    s = snap(a, b, sm={1: {GPU: 0.8}, 2: {GPU: 0.1}})
    assert judge(s, policy()) == []
    # under `force` the share is a cap the shim holds it to: still judged
    f, g = sharing("low", "low", node_region=True, policy_a="force")
    assert core_plan({GPU: [f, g]})[("a", GPU)].cap_percent == 30
    assert [v.kind for v in judge(snap(f, g, sm={1: {GPU: 0.8}}), policy())] == [
        VerdictKind.COMPUTE]
    # one workload whose shims cannot see the region: the agent coordinates them all
    mixed = core_plan({GPU: [a, workload("c", (3,), rule(cores_percent=30), shim={3: {GPU: MiB}},
                                          node_region=False)]})
    assert all(p.override for p in mixed.values()), mixed


def test_unmanaged_gpu_process_gets_unmanaged_rule() -> None:
    unmanaged = rule(name="unmanaged", denied=True, denied_reason="no workload owns it",
                     response=Response.KILL, grace_seconds=0)
    w = workload(shim={100: {GPU: MiB}})
    s = snap(w, nvml={100: {GPU: MiB}, 555: {GPU: 300 * MiB}, 556: {GPU: 0}})
    acts = decide(s, policy(unmanaged=unmanaged), 0.0)
    assert [(str(a.kind), a.pids) for a in acts] == [("alert", (555,)), ("kill", (555,))]
    assert acts[0].verdict is not None and acts[0].verdict.kind == VerdictKind.DENIED
    assert acts[0].key.pod == "unmanaged"
    spared = decide(s, policy(unmanaged=unmanaged, protected=frozenset({Pid(555)})), 0.0)
    assert spared == []


def test_unmanaged_is_judged_by_nvml_when_nvml_is_on() -> None:
    unmanaged = rule(name="unmanaged", limit=0, response=Response.ALERT)
    only_ebpf = snap(ebpf={777: {GPU: 5 * MiB}}, nvml={})
    assert judge(only_ebpf, policy(unmanaged=unmanaged)) == []
    no_nvml = snap(ebpf={777: {GPU: 5 * MiB}})
    (v,) = judge(no_nvml, policy(unmanaged=unmanaged))
    assert v.kind == VerdictKind.MEMORY and v.wid == "unmanaged:777"


def test_core_policy_force_and_disable() -> None:
    forced = workload("f", (1,), rule(cores_percent=30, core_policy="force"),
                      shim={1: {GPU: MiB}}, node_region=False)
    assert core_plan({GPU: [forced]})[("f", GPU)].effective_cores_percent == 30  # even alone
    off = workload("d", (2,), rule(cores_percent=30, core_policy="disable"),
                   shim={2: {GPU: MiB}}, node_region=False)
    a, _ = sharing("low", "low")
    assert core_plan({GPU: [off, a]})[("d", GPU)].effective_cores_percent == 0
    assert judge(snap(forced, sm={1: {GPU: 0.9}}), policy())[0].kind == VerdictKind.COMPUTE
