"""The bypass tolerance is for NVML, whose numbers include each process's context; the eBPF
ledger counts allocations exactly and gets at most one allocation granularity (64 MiB) beyond
the limit, whatever path allocated the memory. The in-kernel kill limit follows the same rule,
for every GPU of the workload."""

from __future__ import annotations

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import decide, judge
from agent.model import ActionKind, Response, VerdictKind

LIMIT = 1024 * MiB
TOLERANCE = 768 * MiB  # the policy language's default


def test_in_process_bypass_under_the_tolerance_is_a_memory_verdict() -> None:
    """What a process that allocates around the shim (dlvsym to the real dlsym) looked like:
    shim 940 MiB, eBPF 1600 MiB, NVML 1900 MiB on a 1 GiB slice, and no verdict for 10 s."""
    r = rule(limit=LIMIT, bypass_tolerance_bytes=TOLERANCE,
             response=Response.KILL, grace_seconds=0)
    w = workload(pids=(100,), r=r, shim={100: {GPU: 940 * MiB}})
    verdicts = judge(snap(w, ebpf={100: {GPU: 1600 * MiB}}), policy())
    assert [(v.kind, v.sources) for v in verdicts] == [(VerdictKind.MEMORY, ("ebpf",))]


def test_ebpf_gets_one_allocation_granularity_and_no_more() -> None:
    r = rule(limit=LIMIT, bypass_tolerance_bytes=TOLERANCE)
    w = workload(pids=(100,), r=r, shim={100: {GPU: 900 * MiB}})
    at_edge = judge(snap(w, ebpf={100: {GPU: LIMIT + 64 * MiB}}), policy())
    assert at_edge == []
    beyond = judge(snap(w, ebpf={100: {GPU: LIMIT + 64 * MiB + 1}}), policy())
    assert [v.kind for v in beyond] == [VerdictKind.MEMORY]


def test_a_tolerance_smaller_than_the_granularity_is_kept_for_ebpf() -> None:
    r = rule(limit=LIMIT, bypass_tolerance_bytes=8 * MiB)
    w = workload(pids=(100,), r=r, shim={100: {GPU: 300 * MiB}})
    kinds = {v.kind for v in judge(snap(w, ebpf={100: {GPU: LIMIT + 9 * MiB}}), policy())}
    assert VerdictKind.MEMORY in kinds


def test_nvml_keeps_the_tolerance_for_context_memory() -> None:
    r = rule(limit=LIMIT, bypass_tolerance_bytes=TOLERANCE)
    w = workload(pids=(100,), r=r, shim={100: {GPU: 1000 * MiB}})
    assert judge(snap(w, nvml={100: {GPU: 1500 * MiB}}), policy()) == []


def test_in_kernel_kill_limit_is_the_slice_of_every_gpu_plus_one_granularity() -> None:
    """The kernel's ledger sums a process's allocations over its GPUs."""
    for gpus, want in ((1, LIMIT + 64 * MiB), (2, 2 * LIMIT + 64 * MiB)):
        r = rule(limit=LIMIT, bypass_tolerance_bytes=TOLERANCE, gpus=gpus,
                 response=Response.KILL, grace_seconds=0)
        acts = decide(snap(workload(pids=(7,), r=r), ebpf_can_kill=True), policy(), 0.0)
        assert [(a.pids, a.limit_bytes) for a in acts if a.kind == ActionKind.ARM] == [
            ((7,), want)]
