"""Two paced containers on one simulated GPU take turns (limiter.h, "turns"): each launches only
inside its own window of the 40 ms period, so their work is never queued at the same time (on a
real GPU that would make it time-slice between the two contexts), and each still gets its share."""

from __future__ import annotations

import time

import pytest

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
    from libvgpu.region import Region

    regions = {name: tmp_path / f"{name}.region" for name in ("a", "b")}
    times = {name: tmp_path / f"{name}.times" for name in ("a", "b")}
    started = time.monotonic_ns()
    procs = {
        name: loop.start(sim_gpu.env, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT=str(limit),
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions[name]),
                         LAUNCH_LOOP_TIMES=str(times[name]))
        for name, limit in (("a", 30), ("b", 70))
    }
    time.sleep(1.5)
    states = {}
    for name, path in regions.items():
        with Region.open(path) as region:
            states[name] = region.compute_state(0)
    shares = {name: loop.result(p)["share"] for name, p in procs.items()}

    assert states["a"].turns and states["b"].turns, states
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
    from libvgpu.region import Region

    path = tmp_path / "alone.region"
    proc = loop.start(sim_gpu.env, "kernel", 500, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                      GPU_CORE_UTILIZATION_POLICY="force",
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(path))
    time.sleep(1.0)
    with Region.open(path) as region:
        state = region.compute_state(0)
    assert loop.result(proc)["share"] == pytest.approx(0.30, abs=0.05)
    assert state.effective_pct == 30 and not state.turns, state


@pytest.mark.slow
def test_a_container_s_processes_share_its_one_window(loop, sim_gpu, tmp_path) -> None:
    # two processes of the 30 % container (one region) and one of the 70 % container
    a = tmp_path / "a.region"
    procs = [loop.start(sim_gpu.env, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT="30",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(a)) for _ in range(2)]
    procs.append(loop.start(sim_gpu.env, "kernel", 500, 3.5, CUDA_DEVICE_SM_LIMIT="70",
                            CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "b.region")))
    shares = [loop.result(p)["share"] for p in procs]
    assert shares[0] + shares[1] == pytest.approx(0.30, abs=0.05), shares
    assert shares[2] == pytest.approx(0.70, abs=0.05), shares


@pytest.mark.slow
def test_long_kernels_get_their_share_through_a_longer_period(loop, sim_gpu, tmp_path) -> None:
    # 3 ms kernels: a 12-ms window of the 40-ms period held 3 of them and wasted the rest
    # (22.5 % at 30); the period grows until a window holds 10 of the longest kernels
    procs = {
        limit: loop.start(sim_gpu.env, "kernel", 3000, 4.5, CUDA_DEVICE_SM_LIMIT=str(limit),
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{limit}.region"))
        for limit in (30, 70)
    }
    shares = {limit: loop.result(p)["share"] for limit, p in procs.items()}
    for limit, share in shares.items():
        assert share == pytest.approx(limit / 100, abs=0.05), shares
