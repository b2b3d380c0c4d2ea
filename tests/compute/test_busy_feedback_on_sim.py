"""On the simulated GPU (whose NVML reports the timeline's busy time): a paced container alone
on its GPU keeps a cost scale of 1 when its estimates are exact, and GPU work that gpuwarden
does not manage (no shim, not in the node region) counts against it: the busy feedback raises
its charged costs, up to 2x, holding it below its limit (the safe side)."""

from __future__ import annotations

import subprocess

import pytest

from libvgpu.region import Region


@pytest.mark.slow
def test_exact_estimates_keep_scale_one(loop, sim_gpu, tmp_path) -> None:
    region = tmp_path / "c.region"
    out = loop.run(sim_gpu.env, "kernel", 500, 4.0, CUDA_DEVICE_SM_LIMIT="30",
                   GPU_CORE_UTILIZATION_POLICY="force",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region))
    with Region.open(region) as r:
        state = r.compute_state(0)
    assert state.cost_scale == pytest.approx(1.0, abs=0.05)
    assert out["share"] == pytest.approx(0.30, abs=0.05)


@pytest.mark.slow
def test_unmanaged_work_counts_against_a_paced_container(loop, sim_gpu, tmp_path) -> None:
    region = tmp_path / "c.region"
    unmanaged_env = {k: v for k, v in loop.env(sim_gpu.env).items() if k != "LD_PRELOAD"}
    other = subprocess.Popen([str(loop.exe), "kernel", "100", "5.0"], env=unmanaged_env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = loop.run(sim_gpu.env, "kernel", 500, 4.5, CUDA_DEVICE_SM_LIMIT="30",
                   GPU_CORE_UTILIZATION_POLICY="force",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region))
    loop.result(other)
    with Region.open(region) as r:
        state = r.compute_state(0)
    assert 1.3 <= state.cost_scale <= 2.0
    assert out["share"] <= 0.30
