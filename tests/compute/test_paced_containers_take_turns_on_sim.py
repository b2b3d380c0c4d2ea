"""Two paced containers on one simulated GPU take turns (limiter.h, "turns"): each launches only
inside its own window of the 40 ms period, so their work is never queued at the same time (on a
real GPU that would make it time-slice between the two contexts), and each still gets its share."""

from __future__ import annotations

import time

import pytest
from rounds import (
    assert_held_to_limits,
    compute_state,
    each_run,
    judged_runs,
    limit_shares,
    medians,
)
from testbed import wait_for

PERIOD_NS = 40_000_000
BINS = 40  # 1 ms each




def phase_bins(path, since: int) -> list[int]:
    """Launches per 1 ms bin of the period, from `since` on."""
    bins = [0] * BINS
    for word in path.read_text().split():
        t = int(word)
        if t >= since:
            bins[(t % PERIOD_NS) * BINS // PERIOD_NS] += 1
    return bins


@pytest.mark.slow
def test_two_paced_containers_launch_in_disjoint_windows(loop, sim_gpu, tmp_path) -> None:
    regions = {name: tmp_path / f"{name}.region" for name in ("a", "b")}
    times = {name: tmp_path / f"{name}.times" for name in ("a", "b")}
    started = time.monotonic_ns()
    procs = {
        name: loop.start(sim_gpu.env, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT=str(limit),
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions[name]),
                         LAUNCH_LOOP_TIMES=str(times[name]))
        for name, limit in (("a", 30), ("b", 70))
    }
    states = {}

    def both_take_turns() -> bool:
        states.update({name: compute_state(path) for name, path in regions.items()})
        return all(st.turns for st in states.values())

    # (the phase analysis below still starts 1 s after the start, whenever this returns)
    wait_for(both_take_turns, 3, "both paced containers taking turns",
             detail=lambda: f"their compute states: {states}")
    shares = {name: loop.result(p)["share"] for name, p in procs.items()}

    assert shares["a"] == pytest.approx(0.30, abs=0.05), shares
    assert shares["b"] == pytest.approx(0.70, abs=0.05), shares
    since = started + 1_000_000_000
    a, b = phase_bins(times["a"], since), phase_bins(times["b"], since)
    # each launches in its own arc of the period: a bin both use is a window edge, at most two
    # edges (plus one bin of clock/wake-up jitter each)
    busy_a = {i for i, n in enumerate(a) if n > sum(a) / 200}
    busy_b = {i for i, n in enumerate(b) if n > sum(b) / 200}
    assert len(busy_a & busy_b) <= 4, (a, b)
    # and the arcs are about as long as the shares (12 ms and 28 ms of 40)
    assert len(busy_a) == pytest.approx(12, abs=3), a
    assert len(busy_b) == pytest.approx(28, abs=3), b


@pytest.mark.slow
def test_a_container_alone_takes_no_turns(loop, sim_gpu, tmp_path) -> None:
    path = tmp_path / "alone.region"
    proc = loop.start(sim_gpu.env, "kernel", 500, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                      GPU_CORE_UTILIZATION_POLICY="force",
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(path))

    def paced():
        # at its 30 % and 100 launches in: many ticks, turns would have been decided
        st = compute_state(path)
        return st if st.effective_pct == 30 and st.launches >= 100 else None

    alone = wait_for(paced, 2, "the container paced at 30 % and launching")
    assert loop.result(proc)["share"] == pytest.approx(0.30, abs=0.05)
    assert not alone.turns, alone


@pytest.mark.slow
def test_a_container_s_processes_share_its_one_window(loop, make_sim_gpu, tmp_path) -> None:
    # two processes of the 30 % container (one region) and one of the 70 % container; three
    # runs, judged by their medians (rounds.py)
    def one(i: int) -> dict[str, float]:
        run, gpu = loop.fresh(str(i)), make_sim_gpu().env
        a = tmp_path / f"a{i}.region"
        procs = [run.start(gpu, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT="30",
                           CUDA_DEVICE_MEMORY_SHARED_CACHE=str(a)) for _ in range(2)]
        procs.append(run.start(gpu, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT="70",
                               CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"b{i}.region")))
        shares = [float(run.result(p)["share"]) for p in procs]
        return {"30 container": shares[0] + shares[1], "70 container": shares[2]}

    runs = judged_runs(loop, one)
    m = medians(runs)
    assert m["30 container"] == pytest.approx(0.30, abs=0.05), each_run(runs)
    assert m["70 container"] == pytest.approx(0.70, abs=0.05), each_run(runs)


@pytest.mark.slow
def test_long_kernels_get_their_share_through_a_longer_period(loop, make_sim_gpu,
                                                              tmp_path) -> None:
    # 3 ms kernels: a 12-ms window of the 40-ms period held 3 of them and wasted the rest
    # (22.5 % at 30); the period grows until a window holds LIM_TURN_KERNELS of the longest
    # kernels.  Three runs, judged by their medians (rounds.py)
    runs = limit_shares(loop, make_sim_gpu, (30, 70), "kernel", 3000, 4.5, tmp=tmp_path)
    assert_held_to_limits(runs, (30, 70))
