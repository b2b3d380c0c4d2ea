"""A low-priority process beside a claiming high keeps its queue short (lim_low_queue_wait): after
the wait it is told, its queued work plus the launch is at most max(bound, bound/2 + cost), which
is all a high burst can find ahead of it; and it is not held back further than that, so the
queue it launches on top of is still half the bound (the GPU does not idle between its kernels)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

US = 1_000
BOUND = 1_000 * US


def wait(driver, queued: int, cost: int, bound: int = BOUND) -> int:
    return int(driver.run("lowqueue", queued, cost, bound))


def test_short_kernels_fill_the_bound(limiter_driver) -> None:
    # 200-us kernels: a launch goes while the queue holds at most 800 us
    assert wait(limiter_driver, 800 * US, 200 * US) == 0
    assert wait(limiter_driver, 900 * US, 200 * US) == 100 * US
    assert wait(limiter_driver, 0, 200 * US) == 0


def test_long_kernels_overlap_by_half_the_bound(limiter_driver) -> None:
    # 1-ms kernels: the next one goes once the queue is down to 500 us (no gap on the GPU)
    assert wait(limiter_driver, 500 * US, 1_000 * US) == 0
    assert wait(limiter_driver, 1_500 * US, 1_000 * US) == 1_000 * US
    # a kernel longer than the bound still goes, on top of half the bound at most
    assert wait(limiter_driver, 2_000 * US, 5_000 * US) == 1_500 * US


@settings(max_examples=60, deadline=None)
@given(queued=st.integers(0, 20_000 * US), cost=st.integers(1, 5_000 * US))
def test_queue_after_the_wait_is_bounded_and_not_starved(limiter_driver, queued: int,
                                                         cost: int) -> None:
    w = wait(limiter_driver, queued, cost)
    left = queued - w  # the low one's queue when its launch goes
    assert 0 <= w <= queued
    assert left + cost <= max(BOUND, BOUND // 2 + cost)
    if w > 0:  # held back only down to the queue a launch may go on top of
        assert left == max(BOUND // 2, BOUND - cost)
