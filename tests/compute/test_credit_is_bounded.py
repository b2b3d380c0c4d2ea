"""An idle container cannot save up GPU time: after any idle period, the launches that go
without waiting are bounded by the tolerance, however long the idle period was."""

from __future__ import annotations

import pytest

MS = 1_000_000


@pytest.mark.parametrize("idle_ns", [10 * MS, 1_000 * MS, 100_000 * MS])
def test_burst_after_idle_is_bounded_by_tolerance(limiter_driver, idle_ns: int) -> None:
    limit, cost, tolerance = 30, 100_000, 2 * MS
    # Each launch occupies cost*100/limit of pace; the tolerance admits that many, plus one.
    bound = tolerance // (cost * 100 // limit) + 1
    out = limiter_driver.fields("burst", limit, cost, idle_ns, tolerance)
    assert 1 <= out["free_launches"] <= bound


def test_longer_idle_buys_no_more_burst(limiter_driver) -> None:
    short = limiter_driver.fields("burst", 10, 50_000, 5 * MS, 2 * MS)["free_launches"]
    long = limiter_driver.fields("burst", 10, 50_000, 3_600_000 * MS, 2 * MS)["free_launches"]
    assert long == short
