"""On a shared GPU the pacer lets launches go in bursts (lim_pacer_book_bursty): the share is
the same, but the launcher waits (and the GPU switches contexts) once per burst instead of once
per launch."""

from __future__ import annotations

import pytest

MS = 1_000_000


@pytest.mark.parametrize("limit", [10, 30, 70])
def test_bursty_pacing_holds_the_share_with_few_waits(limiter_driver, limit: int) -> None:
    cost, run = 200_000, 5_000 * MS
    smooth = limiter_driver.fields("pace", limit, cost, run, 2 * MS, 2 * MS)
    bursty = limiter_driver.fields("pace", limit, cost, run, 20 * MS, 2 * MS, "bursty")
    assert bursty["share"] == pytest.approx(limit / 100, abs=0.01)
    assert smooth["share"] == pytest.approx(limit / 100, abs=0.01)
    # one wait per burst of 20 ms of pace: about run / 20 ms, against one per launch
    assert bursty["waits"] <= run / (20 * MS) * 1.1
    assert bursty["waits"] * 10 < smooth["waits"]


def test_bursty_credit_is_still_bounded(limiter_driver) -> None:
    # after a long idle period the first burst is bounded by the tolerance like any other
    out = limiter_driver.fields("pace", 30, 200_000, 5_000 * MS, 20 * MS, 2 * MS, "bursty")
    assert out["max_queued_ns"] <= 2 * MS + 200_000
