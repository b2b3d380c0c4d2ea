"""A container of several processes gets its share beside other containers when its kernels are
longer than the GPU's time slice (lim_split_wait).  Its processes launch in its window at the same
time, the GPU time-slices between them (1-ms slices on the simulated GPU, about 2 ms on an H100),
each kernel's measured span holds its sibling's slices, and the container was charged its time
twice: before the split, 30 + a 70 of two processes got 0.30 + 0.52 with 3-ms kernels (H100,
13-ms kernels: 0.28 + 0.54).  Now each process launches in its own part of the container's
window, or in a sibling's while that one has nothing queued (and did not come back at once after
its last work: lim_split_busy_until).  Simulated GPU, kernels of 2 ms synchronised every 4 unless
said, 3-s runs measured from 1 s on, medians of three runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from rounds import judged_runs, medians

KERNEL_US = 2000
SPARSE = {"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "30000"}  # one kernel every ~32 ms


def containers_together(loop, make_sim_gpu, tmp: Path,
                        *containers: tuple[dict[str, str], ...]) -> dict[str, float]:
    """judged_runs of the containers started together (each a tuple of its processes'
    environments; GRID_US: its kernels' µs, KERNEL_US by default); the medians of each
    container's share (its processes' summed) by index, and of each process's (`"i.k"`)."""
    def one(r: int) -> dict[str, float]:
        run, gpu = loop.fresh(str(r)), make_sim_gpu().env
        procs = {f"{i}.{k}": run.start(gpu, "kernel", int(env.pop("GRID_US", KERNEL_US)), 3.0,
                                       CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{r}-{i}"),
                                       **({"LAUNCH_LOOP_SYNC": "4"} | env))
                 for i, container in enumerate(containers)
                 for k, env in enumerate(map(dict, container))}
        shares = {key: float(loop.result(p)["share"]) for key, p in procs.items()}
        for i in range(len(containers)):  # (a container's own processes' keys start "i.")
            shares[str(i)] = sum(v for key, v in shares.items() if key.startswith(f"{i}."))
        return shares

    return medians(judged_runs(loop, one))


def limit(pct: int, **extra: str) -> dict[str, str]:
    return {"CUDA_DEVICE_SM_LIMIT": str(pct), **extra}


@pytest.mark.slow
@pytest.mark.parametrize("two", [0, 1], ids=["the 30 one of two", "the 70 one of two"])
def test_a_container_of_two_processes_gets_its_share(loop, make_sim_gpu, tmp_path: Path,
                                                     two: int) -> None:
    shapes = [(limit(30),), (limit(70),)]
    shapes[two] = shapes[two] * 2
    got = containers_together(loop, make_sim_gpu, tmp_path, *shapes)
    assert got["0"] == pytest.approx(0.30, abs=0.05), got
    assert got["1"] == pytest.approx(0.70, abs=0.05), got


@pytest.mark.slow
def test_a_sibling_that_launches_now_and_then_leaves_its_part_to_the_other(
        loop, make_sim_gpu, tmp_path: Path) -> None:
    # with parts held whether used or not, the 70 one got 0.38 (its busy process half the window,
    # the sparse one ~0.04); the GPU must not idle while the busy one has work
    got = containers_together(loop, make_sim_gpu, tmp_path, (limit(30),),
                              (limit(70), limit(70, **SPARSE)))
    assert got["0"] == pytest.approx(0.30, abs=0.05), got
    assert got["1"] >= 0.63, got
    assert got["1.1"] >= 0.03, got  # the sparse one still runs (~0.06 alone)


@pytest.mark.slow
def test_siblings_that_synchronise_each_kernel_keep_out_of_each_other_s_part(
        loop, make_sim_gpu, tmp_path: Path) -> None:
    # 12-ms kernels, each synchronised and followed by 1 ms of the application's own work, on a
    # GPU whose 2-ms slices cost 0.4 ms a switch (an H100 ran two such 11-ms kernels time-sliced
    # in 26-29 ms).  In that millisecond a process has nothing queued, and its sibling, polling
    # for an idle part, took it and ran beside it, time-sliced, to the part's end: the 70 one got
    # 0.59 (H100, torch 16384² matmuls: 0.50, the 30 one 0.23); each loop alone leaves ~8 % of
    # its time idle, so ~0.64 is its due (0.65-0.66 now)
    sync_each = {"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "1000", "GRID_US": "12000",
                 "GPUWARDEN_SIM_TIMESLICE": "2000", "GPUWARDEN_SIM_SWITCH": "400"}
    got = containers_together(loop, make_sim_gpu, tmp_path, (limit(30, **sync_each),),
                              (limit(70, **sync_each),) * 2)
    assert got["0"] == pytest.approx(0.27, abs=0.05), got
    assert got["1"] >= 0.62, got


@pytest.mark.slow
def test_a_sibling_with_short_kernels_takes_a_part_beside_long_ones(
        loop, make_sim_gpu, tmp_path: Path) -> None:
    # its 0.2-ms kernels' slices cut the other's 2-ms kernels as much: when only processes with
    # long kernels took parts, the 70 one got 0.60 with 3-ms kernels (0.56 before any split)
    got = containers_together(loop, make_sim_gpu, tmp_path, (limit(30),),
                              (limit(70), limit(70, GRID_US="200")))
    assert got["0"] == pytest.approx(0.30, abs=0.05), got
    assert got["1"] == pytest.approx(0.70, abs=0.05), got


@pytest.mark.slow
def test_three_processes_take_their_window_by_one_period(loop, make_sim_gpu, tmp_path: Path
                                                         ) -> None:
    # each process asked for its own period class, which follows its own longest kernels: with
    # 3-ms kernels the three computed windows of 160 or 320 ms as their samples varied, and
    # overlapped (the 70 one 0.46-0.65 in seven runs); one class for the container now
    three = (limit(70, GRID_US="3000"),) * 3
    got = containers_together(loop, make_sim_gpu, tmp_path, (limit(30, GRID_US="3000"),), three)
    assert got["0"] == pytest.approx(0.30, abs=0.05), got
    assert got["1"] == pytest.approx(0.70, abs=0.07), got
