"""The agent's rule holds one memory limit per GPU of the workload, resolved from that GPU's size:
a percentage on two GPUs of different sizes gives each its own limit, decide() judges each GPU
against its own, and the in-kernel kill limit is their sum. Before, the rule held one number
(from the first GPU's size) for every GPU, and the fallback for a GPU of unknown size dropped the
policy's caps."""

from __future__ import annotations

from decide_factories import policy, snap, workload

from agent.decide import decide, judge, kernel_limit
from agent.model import ActionKind, GpuUuid, Response, VerdictKind
from agent.rules import to_rule
from gpuwarden.limit import UNLIMITED, MemoryLimit
from policy import EffectiveRule, ResourceRequest, Workload, load_texts

GIB = 1 << 30
BIG, SMALL = GpuUuid("GPU-big"), GpuUuid("GPU-small")
TOTALS: dict[str, int | None] = {BIG: 80 * GIB, SMALL: 16 * GIB}


def effective(text: str, **request: int) -> EffectiveRule:
    loaded = load_texts([("p.gwp", "version 1\n" + text)])
    assert loaded.policy is not None, [d.render() for d in loaded.errors]
    return loaded.policy.evaluate(Workload(request=ResourceRequest(**request)))


HALF = 'rule "half" {\n  on_violation = kill after 0s\n}\n'


def test_a_percentage_gives_each_gpu_its_own_limit() -> None:
    r = to_rule(effective(HALF, gpu=2, gpumem_percentage=50), TOTALS)
    assert r.memory_limit(BIG) == MemoryLimit(40 * GIB)
    assert r.memory_limit(SMALL) == MemoryLimit(8 * GIB)


def test_each_gpu_is_judged_against_its_own_limit() -> None:
    r = to_rule(effective(HALF, gpu=2, gpumem_percentage=50), TOTALS)
    w = workload(pids=(100,), r=r, shim={100: {BIG: 30 * GIB, SMALL: 10 * GIB}})
    verdicts = judge(snap(w), policy())
    # 30 GiB is within the big GPU's 40 GiB; 10 GiB is above the small one's 8 GiB
    assert [(v.kind, v.gpu, v.limit) for v in verdicts] == [
        (VerdictKind.MEMORY, SMALL, 8 * GIB)]


def test_the_in_kernel_kill_limit_is_the_sum_of_the_gpus_limits() -> None:
    r = to_rule(effective(HALF, gpu=2, gpumem_percentage=50), TOTALS)
    assert r.response == Response.KILL and r.grace_seconds == 0
    assert kernel_limit(r) == 48 * GIB
    acts = decide(snap(workload(pids=(7,), r=r), ebpf_can_kill=True), policy(), 0.0)
    slack = min(r.bypass_tolerance_bytes, policy().ebpf_slack_bytes)
    assert [a.limit_bytes for a in acts if a.kind == ActionKind.ARM] == [48 * GIB + slack]


def test_a_gpu_of_unknown_size_keeps_the_mib_cap() -> None:
    """NVML off: the GPU's size is unknown. A 50% request under an 8 GiB cap is limited to
    8 GiB; the old fallback gave no limit at all (only an absolute request counted)."""
    eff = effective('rule "capped" {\n  cap gpumem <= 8GiB deny\n}\n', gpumem_percentage=50)
    r = to_rule(eff, {BIG: None})
    assert r.memory_limit(BIG) == MemoryLimit(8 * GIB)
    assert r.memory_limit(GpuUuid("GPU-elsewhere")) == MemoryLimit(8 * GIB)
    w = workload(pids=(100,), r=r, shim={100: {BIG: 9 * GIB}})
    assert [v.kind for v in judge(snap(w), policy())] == [VerdictKind.MEMORY]


def test_a_gpu_outside_the_workload_gets_the_limit_resolved_without_a_size() -> None:
    r = to_rule(effective(HALF, gpumem_percentage=50), {BIG: 80 * GIB})
    assert r.memory_limit(SMALL) == UNLIMITED  # a percentage of an unknown size: none
    assert kernel_limit(r) == 40 * GIB
