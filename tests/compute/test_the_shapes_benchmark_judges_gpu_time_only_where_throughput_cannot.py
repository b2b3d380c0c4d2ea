"""The shapes benchmark judges a point by NVML's busy time only where its throughput share cannot
tell its GPU time: a shape launch-bound by throughput (alone under the limit) whose eager
launches still keep the GPU busy the limit's share alone (tests/benchmarks/bench_compute_shapes.py,
busy_verdict)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_compute_shapes as bench


@pytest.mark.parametrize(("limit", "alone_share", "alone_busy", "busy", "want"), [
    # 256² synchronised after each, H100: 8.6 % of the saturated throughput, 14.3 % busy alone
    (10, 8.6, 14.3, 11.0, True), (10, 8.6, 14.3, 16.0, False),
    # ... under a limit it does not reach in GPU time either: its speed judges it
    (30, 8.6, 14.3, 15.0, None),
    # 4096² matmuls: the throughput share is the GPU-time share, NVML's reading judges nothing
    (50, 96.4, 96.5, 43.5, None),
    # no reading, no verdict
    (10, 8.6, None, 11.0, None), (10, None, 14.3, 11.0, None), (10, 8.6, 14.3, None, None),
])
def test_busy_time_judges_only_launch_bound_shapes_that_use_the_limit_alone(
        limit: int, alone_share: float | None, alone_busy: float | None, busy: float | None,
        want: bool | None) -> None:
    assert bench.busy_verdict(limit, alone_share, alone_busy, busy) is want
