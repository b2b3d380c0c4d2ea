"""Short kernels on the simulated GPU, as short as real ones (5 us: a 256²..1024² bf16 matmul on
an H200), with a real driver's call costs (GPUWARDEN_SIM_CALL_NS): held to their share whatever
the synchronisation pattern, and a launch-bound loop whose measurements over-estimate its
kernels (a kernel launched into an idle stream is measured with the launch's own latency) is
scaled back to the GPU's busy time instead of being held below a limit it never reaches."""

from __future__ import annotations

import pytest
from rounds import assert_held_to_limits, limit_shares

from libvgpu.region import Region

REAL_CALLS = "2900,1100,150"  # H200, driver 580: launch, cuEventRecord, cuEventQuery (ns)


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["0", "64"], ids=["never", "every-64"])
def test_short_kernels_are_held_to_their_share(loop, make_sim_gpu, sync: str) -> None:
    # three runs, judged by the medians (rounds.py): ~60,000 launches a second at 30 % keep a
    # core busy, and one whole-suite CI run on a 2-core machine read 0.245
    runs = limit_shares(loop, make_sim_gpu, (10, 30), "kernel", 5, 3.0,
                        GPU_CORE_UTILIZATION_POLICY="force", LAUNCH_LOOP_SYNC=sync,
                        GPUWARDEN_SIM_CALL_NS=REAL_CALLS)
    assert_held_to_limits(runs, (10, 30))


@pytest.mark.slow
def test_over_estimates_of_a_launch_bound_loop_are_scaled_down(loop, sim_gpu, tmp_path) -> None:
    # launches into an idle stream: each measurement carries the end record's CPU time (11 us
    # here, 10x a real one, so the over-estimate is twice the kernel)
    region = tmp_path / "c.region"
    loop.run(sim_gpu.env, "kernel", 5, 5.0, CUDA_DEVICE_SM_LIMIT="90",
             GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_SIM_CALL_NS="2900,11000,1500",
             GPUWARDEN_SIM_UTIL_WINDOW_MS="200", LAUNCH_LOOP_GAP_US="10", LAUNCH_LOOP_SYNC="4",
             CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region))
    with Region.open(region) as r:
        state = r.compute_state(0)
    # charged (the estimates) is about twice the GPU's busy time: the factor heads for 1/2
    assert state.cost_scale <= 0.8, state
