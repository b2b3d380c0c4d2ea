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


@pytest.mark.parametrize("limit", [10, 30, 70])
def test_a_longer_tolerance_spends_its_credit_at_once_then_waits_for_one_burst(
        limiter_driver, limit: int) -> None:
    # a light container's tolerance (LIM_LIGHT_BURST_NS of GPU time: 50 ms) over bursts of 20 ms
    # of pace: from idle its first launches queue ~50 ms of work at once (less the CPU time they
    # take), then it waits as often as with the short tolerance, holding the same share
    cost, run, tol = 200_000, 5_000 * MS, 50 * MS * 100 // limit
    out = limiter_driver.fields("pace", limit, cost, run, tol, 1_000 * MS, "bursty", 20 * MS)
    assert out["share"] == pytest.approx(limit / 100, abs=0.01)
    assert 49 * MS <= out["max_queued_ns"] <= 50 * MS + 2 * cost
    assert out["waits"] <= run / (20 * MS) * 1.1
