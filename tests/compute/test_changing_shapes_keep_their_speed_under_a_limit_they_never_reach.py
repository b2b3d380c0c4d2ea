"""A workload whose shapes keep changing (sequence lengths, batch sizes) launches kernels of
unknown cost all the time.  Such launches are charged provisionally, and a few at most may be in
flight before one waits for their measurements (test_cold_start_pays_for_its_first_kernels.py);
the bound must not slow a launch-bound workload that stays below its limit.

On the simulated GPU: 20-us kernels with 80 us of CPU between launches (alone ~24 % busy), every
launch a new signature (more than the cost table holds, so none is ever known), at 30 %.  With
one launch of unknown cost in flight and no read before waiting, it ran at 30 % of its speed
alone."""

from __future__ import annotations

import statistics

import pytest


@pytest.mark.slow
def test_every_launch_a_new_shape_under_30pct_keeps_its_speed(loop, sim_gpu, tmp_path) -> None:
    # alone and held alternate three times: a launch-bound loop's speed is the host's, which a
    # busy 2-core machine moves by 10-25 % from one run to the next (0.73 once in a whole-suite
    # run, 0.93-1.07 in runs alone); the medians of three compare like with like
    runs: dict[str, list[dict[str, float | str]]] = {"alone": [], "held": []}
    for i in range(3):
        for name, limits in (("alone", {}), ("held", {"CUDA_DEVICE_SM_LIMIT": "30",
                                                      "GPU_CORE_UTILIZATION_POLICY": "force"})):
            runs[name].append(loop.run(
                sim_gpu.env, "kernel", 20, 2.0, LAUNCH_LOOP_SHAPES="1048576",
                LAUNCH_LOOP_SYNC="16", LAUNCH_LOOP_GAP_US="80",
                CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{name}{i}.region"), **limits))
    for run in runs["alone"]:
        assert float(run["share"]) < 0.27, run  # alone it stays below the limit
    alone = statistics.median(float(r["rate"]) for r in runs["alone"])
    held = statistics.median(float(r["rate"]) for r in runs["held"])
    assert held >= 0.9 * alone, {name: [r["rate"] for r in rs] for name, rs in runs.items()}
