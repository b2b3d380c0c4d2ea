"""GPUWARDEN_GATE_WAIT=yield: a launch waiting for its turn or its pace stays runnable and
yields the CPU instead of sleeping, so that on a node whose cores are all busy the kernel's
scheduler keeps treating the launching thread as a whole task (docs/compute.md, known limits:
H200 with 16 cores spinning, 70 % paced alone 61.8 % asleep, 73.5 % yielding).  The shares are
those of sleeping waits; what changes is that the waits use the CPU."""

from __future__ import annotations

import resource

import pytest
from rounds import limit_shares, medians


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@pytest.mark.slow
def test_a_yielding_wait_holds_the_limit_and_uses_the_cpu_a_sleep_leaves(loop, sim_gpu) -> None:
    cpu, shares = {}, {}
    for wait in ("sleep", "yield"):
        before = children_cpu_s()
        r = loop.run(sim_gpu.env, "kernel", 1000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                     GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT=wait)
        cpu[wait], shares[wait] = (children_cpu_s() - before) / 2.0, float(r["share"])
        assert "GPUWARDEN_GATE_WAIT" not in str(r["stderr"]), r["stderr"]
    facts = {"cpu share of wall": cpu, "gpu shares": shares}
    print(facts)
    assert shares["yield"] == pytest.approx(0.30, abs=0.05), facts
    assert shares["sleep"] == pytest.approx(0.30, abs=0.05), facts
    # 300 launches a second asleep cost little CPU; waiting ~70 % of the time runnable costs most
    # of a core (less where the machine is busy: yielding gives it to others)
    assert cpu["sleep"] < 0.1 and cpu["yield"] > 0.2, facts


@pytest.mark.slow
def test_two_containers_waiting_by_yielding_take_their_turns_at_30_and_70(
        loop, make_sim_gpu, tmp_path) -> None:
    # judged by the medians of three runs (rounds.py)
    runs = limit_shares(loop, make_sim_gpu, (30, 70), "kernel", 500, 3.0, tmp=tmp_path,
                        GPUWARDEN_GATE_WAIT="yield")
    for limit, share in medians(runs).items():
        assert share == pytest.approx(int(limit) / 100, abs=0.05), runs
