"""Every launch path the simulated driver implements is held to the limit, graphs included (a
graph launch is charged what the whole graph costs on the GPU)."""

from __future__ import annotations

import pytest

PATHS = ("kernel", "ptsz", "ex", "ex_ptsz", "coop", "graph")


@pytest.mark.slow
def test_each_path_held_to_30_percent(loop, make_sim_gpu) -> None:
    procs = {
        path: loop.start(make_sim_gpu().env, path, 300, 2.5, CUDA_DEVICE_SM_LIMIT="30",
                         GPU_CORE_UTILIZATION_POLICY="force")
        for path in PATHS
    }
    shares = {path: loop.result(p)["share"] for path, p in procs.items()}
    for path, share in shares.items():
        assert share == pytest.approx(0.30, abs=0.05), (path, shares)
