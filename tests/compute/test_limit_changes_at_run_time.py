"""A limit written into the container's region applies to running processes within a tick."""

from __future__ import annotations

import time

import pytest
from testbed import wait_for


@pytest.mark.slow
def test_limit_raised_while_running(loop, sim_gpu, tmp_path) -> None:
    from libvgpu.region import Region

    path = tmp_path / "c.region"
    times = tmp_path / "c.times"
    proc = loop.start(sim_gpu.env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="20",
                      GPU_CORE_UTILIZATION_POLICY="force", LAUNCH_LOOP_TIMES=str(times),
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(path))

    def paced() -> bool:
        # 20 launches in at 20 %: past its start (first launches, the pacer's burst), pacing
        with Region.open(path) as region:
            state = region.compute_state(0)
        return state.effective_pct == 20 and state.launches >= 20

    wait_for(paced, 2, "the container launching, paced at its 20 %")
    time.sleep(1.0)  # the measurement window `before`, below
    with Region.open(path) as region:
        assert region.compute_state(0).effective_pct == 20
        region.set_compute_limit(0, 60)
        changed = time.monotonic_ns()
        wait_for(lambda: region.compute_state(0).effective_pct == 60, 0.5,
                 "the running process applying the new limit (60 %)")
    loop.result(proc)
    launches = [int(x) for x in times.read_text().split()]
    # each launch is 1 ms of GPU time: the launch rate is the share
    before = [t for t in launches if changed - 1_000_000_000 <= t < changed]
    after = [t for t in launches if changed + 500_000_000 <= t < changed + 1_500_000_000]
    assert len(before) / 1000 == pytest.approx(0.20, abs=0.05)
    assert len(after) / 1000 == pytest.approx(0.60, abs=0.05)
