"""The pacer alone (fake clock, fake GPU): a launcher that launches as fast as it may gets its
limit's share of GPU time, for long and short kernels, and for several processes sharing the
container's pacer word."""

from __future__ import annotations

import pytest

MS = 1_000_000
RUN = 5_000 * MS
TOLERANCE = 2 * MS
QUEUE = 2 * MS


@pytest.mark.parametrize("limit", [10, 30, 50, 70, 90])
@pytest.mark.parametrize("kernel_ns", [5_000, 200_000, 20 * MS], ids=["5us", "200us", "20ms"])
def test_one_launcher_gets_its_share(limiter_driver, limit: int, kernel_ns: int) -> None:
    out = limiter_driver.fields("pace", limit, kernel_ns, RUN, TOLERANCE, QUEUE)
    assert out["share"] == pytest.approx(limit / 100, abs=0.01)


@pytest.mark.parametrize("procs", [2, 4, 16])
def test_processes_of_one_container_share_one_budget(limiter_driver, procs: int) -> None:
    out = limiter_driver.fields("shared", 30, 100_000, RUN, TOLERANCE, procs)
    assert out["share"] == pytest.approx(0.30, abs=0.01)


def test_queue_ahead_of_gpu_stays_bounded(limiter_driver) -> None:
    # 20 ms kernels at 90 %: the pacer alone would let the launcher run ahead; the queue bound
    # (QUEUE) plus one kernel is the most work ever queued.
    out = limiter_driver.fields("pace", 90, 20 * MS, RUN, TOLERANCE, QUEUE)
    assert out["max_queued_ns"] <= QUEUE + 20 * MS
