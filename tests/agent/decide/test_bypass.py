"""Bypass: a workload process on the GPU that the shim does not know, or eBPF/NVML usage above
the shim's count beyond the tolerance. A corrupt region never makes a bypass by itself."""

from __future__ import annotations

from dataclasses import replace

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import decide, judge
from agent.model import Pid, VerdictKind


def test_process_on_gpu_without_shim_is_bypass_and_killed_at_once() -> None:
    w = workload(pids=(100, 200), shim={100: {GPU: 10 * MiB}}, r=rule(grace_seconds=0))
    acts = decide(snap(w, ebpf={200: {GPU: 4 * MiB}}), policy(), 0.0)
    assert [(str(a.kind), a.verdict.kind if a.verdict else None) for a in acts] == [
        ("alert", VerdictKind.BYPASS), ("kill", VerdictKind.BYPASS)]
    assert "without the shim" in acts[0].verdict.detail


def test_usage_above_shim_beyond_tolerance_is_bypass() -> None:
    w = workload(shim={100: {GPU: 100 * MiB}})
    assert judge(snap(w, ebpf={100: {GPU: 160 * MiB}}), policy()) == []
    (v,) = judge(snap(w, ebpf={100: {GPU: 170 * MiB}}), policy())
    assert v.kind == VerdictKind.BYPASS and v.measured["ebpf"] == 170 * MiB


def test_corrupt_region_checks_memory_but_not_bypass() -> None:
    w = replace(workload(), shim_used=None, region_error="bad magic")
    assert judge(snap(w, ebpf={100: {GPU: 10 * MiB}}), policy()) == []
    (v,) = judge(snap(w, ebpf={100: {GPU: 2000 * MiB}}), policy())
    assert v.kind == VerdictKind.MEMORY


def test_other_gpu_is_judged_separately() -> None:
    from decide_factories import GPU2
    w = workload(shim={100: {GPU: 900 * MiB, GPU2: 1100 * MiB}})
    (v,) = judge(snap(w), policy())
    assert v.gpu == GPU2


def test_nvml_only_evidence_must_hold_before_any_action() -> None:
    from agent.decide import remember

    w = workload(pids=(100,), shim={}, r=rule(grace_seconds=0))
    s = snap(w, nvml={100: {GPU: 500 * MiB}})  # e.g. a process seen just before its exit
    pol = policy(nvml_confirm_seconds=1.5)
    assert decide(s, pol, 10.0) == []
    h = remember(s, pol, [], 10.0)
    assert decide(replace(s, history=h), pol, 11.0) == []
    acts = decide(replace(s, history=h), pol, 11.5)
    assert [str(a.kind) for a in acts] == ["alert", "kill"]
    assert acts[0].verdict is not None and acts[0].verdict.sources == ("nvml",)
    # the same with eBPF evidence acts at once
    s2 = snap(w, ebpf={100: {GPU: 1}}, nvml={100: {GPU: 500 * MiB}})
    assert [str(a.kind) for a in decide(s2, pol, 10.0)] == ["alert", "kill"]


def test_a_process_leaving_after_its_slot_was_released_is_not_a_bypass() -> None:
    """libvgpu releases a process's slot at exit while its memory stays on the GPU until the
    process has gone: during that grace (Workload.shim_leaving) it is neither a process without
    the shim nor bytes above the shim's count; the workload's other processes still are."""
    w = replace(workload(pids=(100, 200), shim={200: {GPU: 10 * MiB}}),
                shim_leaving=frozenset({100}))  # the demo's flake: shim 0, eBPF 256, NVML 774
    s = snap(w, ebpf={100: {GPU: 256 * MiB}, 200: {GPU: 10 * MiB}},
             nvml={100: {GPU: 774 * MiB}, 200: {GPU: 10 * MiB}})
    assert judge(s, policy()) == []
    assert decide(s, policy(), 0.0) == []
    # without the grace, the same evidence is a bypass (the verdict the demo saw)
    (v,) = judge(snap(replace(w, shim_leaving=frozenset()),
                      ebpf={100: {GPU: 256 * MiB}}, nvml={100: {GPU: 774 * MiB}}), policy())
    assert v.kind == VerdictKind.BYPASS and v.detail.endswith("without the shim")
    # a process of the workload that never had a slot is still a bypass
    w3 = replace(w, pids=frozenset({Pid(100), Pid(200), Pid(300)}))
    (v,) = judge(snap(w3, ebpf={100: {GPU: 256 * MiB}, 200: {GPU: 10 * MiB},
                          300: {GPU: 4 * MiB}}), policy())
    assert v.kind == VerdictKind.BYPASS and v.detail == "1 process(es) on the GPU without the shim"
    # the others' bytes above the shim's count beyond the tolerance still are
    (v,) = judge(snap(w, ebpf={100: {GPU: 256 * MiB}, 200: {GPU: 100 * MiB}}), policy())
    assert v.kind == VerdictKind.BYPASS and v.detail.startswith(
        f"ebpf sees {90 * MiB} bytes more than the shim")
