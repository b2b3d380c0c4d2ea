"""Priority on the simulated GPU: a burst of high-priority work starts within 2 ms (p99) of its
launch call while a low-priority container keeps the GPU busy (issue 18).  Run on a simulated GPU
that runs kernels one after another in launch order (`GPUWARDEN_SIM_TIMESLICE=0`), so a high
one's kernel waits for whatever the low one has queued ahead of it: the low one must keep its
queue short while a high one is on the GPU (docs/compute.md, "Priority").  With the sim's default
1-ms time slices the burst would wait at most a slice whatever the low one queued, and the test
would no longer see the queue.  The gate that let the low one keep 2 ms of *measured* work queued
(counted from its newest finished measurement, so 2.5-3 ms in fact) read p99 ~2.9 ms here."""

from __future__ import annotations

import pytest

# a high-priority service: one 200-us kernel per request, synchronised, then idle 8 ms
HIGH = {"CUDA_TASK_PRIORITY": "0", "LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "8000",
        "LAUNCH_LOOP_LATENCY": "1"}


@pytest.mark.slow
def test_high_burst_starts_within_2ms_p99_while_a_low_saturates(loop, make_sim_gpu,
                                                                 tmp_path) -> None:
    sim_gpu = make_sim_gpu(timeslice_us=0)
    low = loop.start(sim_gpu.env, "kernel", 1000, 5.0, CUDA_TASK_PRIORITY="1",
                     CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "low.region"))
    high = loop.start(sim_gpu.env, "kernel", 200, 4.0, **HIGH,
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "high.region"))
    hr, lr = loop.result(high), loop.result(low)
    starts = int(hr["starts"])
    assert starts >= 200, hr  # enough bursts for a 99th percentile
    # the low one did hold the GPU between the bursts (else nothing was ahead of them)
    assert lr["share"] >= 0.5, (lr["share"], hr)
    assert hr["start_p99_us"] <= 2000, (hr["start_p50_us"], hr["start_p99_us"],
                                        hr["start_max_us"], lr["share"])
