"""Kill with no grace arms the in-kernel eBPF kill limit (limit + tolerance) for each process of
the workload when eBPF can kill; changes re-arm, departures disarm; dry runs never arm."""

from __future__ import annotations

from dataclasses import replace

from decide_factories import GPU, MiB, policy, rule, snap, workload

from agent.decide import decide
from agent.model import ActionKind, Mode, Pid


def test_arms_each_process_once() -> None:
    w = workload(pids=(1, 2), r=rule(grace_seconds=0), shim={1: {GPU: MiB}})
    s = snap(w, ebpf_can_kill=True)
    arms = [a for a in decide(s, policy(), 0.0) if a.kind == ActionKind.ARM]
    assert [(a.pids, a.limit_bytes) for a in arms] == [((1,), 1064 * MiB), ((2,), 1064 * MiB)]
    armed = {Pid(1): 1064 * MiB, Pid(2): 1064 * MiB}
    assert decide(replace(s, armed=armed), policy(), 1.0) == []


def test_disarms_processes_that_left_and_never_arms_dry_or_graceful() -> None:
    s = snap(workload(pids=(1,), r=rule(grace_seconds=5)), ebpf_can_kill=True,
             armed={Pid(1): 5, Pid(9): 5})
    acts = decide(s, policy(), 0.0)
    assert [(str(a.kind), a.pids) for a in acts] == [("disarm", (1,)), ("disarm", (9,))]
    audit = snap(workload(pids=(1,), r=rule(grace_seconds=0, mode=Mode.AUDIT)),
                 ebpf_can_kill=True)
    assert decide(audit, policy(), 0.0) == []
    assert decide(snap(workload(r=rule(grace_seconds=0))), policy(), 0.0) == []  # no eBPF
