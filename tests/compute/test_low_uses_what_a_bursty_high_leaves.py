"""Priority on the simulated GPU: a high-priority container busy 30 % of the time in bursts (a
10-ms kernel, synchronised, then idle 23.3 ms, as a service answering requests) keeps >= 90 % of
its alone share, and a low-priority one beside it gets >= 60 % of its alone throughput: what the
high one leaves, less the short wait after each burst (issue 18; docs/compute.md, "Priority").
The gate that yielded to any high launched within 50 ms left the low one 0.2 % of the GPU here;
the one that waited 5 ms + 2 ms past the high one's estimated work, 56 % of its alone."""

from __future__ import annotations

import pytest
from rounds import medians, pair_runs

HIGH = {"CUDA_TASK_PRIORITY": "0", "LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "23300"}


@pytest.mark.slow
def test_low_gets_60pct_of_alone_beside_a_high_busy_30pct(loop, make_sim_gpu, tmp_path) -> None:
    def alone(name: str, grid: int, **extra: str) -> float:
        proc = loop.start(make_sim_gpu().env, "kernel", grid, 4.0, **extra,
                          GPUWARDEN_NODE_REGION=str(tmp_path / f"{name}.node"),
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{name}.region"))
        share = loop.result(proc)["share"]
        assert isinstance(share, float)
        return share

    high_alone = alone("high-alone", 10000, **HIGH)
    low_alone = alone("low-alone", 1000, CUDA_TASK_PRIORITY="1")
    # the pair three times, judged by the medians (rounds.py)
    runs = pair_runs(loop, make_sim_gpu, tmp_path, ("high", 10000, HIGH),
                     ("low", 1000, {"CUDA_TASK_PRIORITY": "1"}), 4.0)
    m = medians(runs)
    facts = {"high alone": high_alone, "low alone": low_alone, "runs": runs}
    assert 0.27 <= high_alone <= 0.33, facts  # busy 30 % of the time, as the issue asks
    assert m["high"] >= 0.9 * high_alone, facts
    assert m["low"] >= 0.6 * low_alone, facts
