"""The busy feedback (limiter.h): while a paced container is alone on its GPU, its charged
costs are scaled by the GPU's busy time (NVML) over what was charged, both ways, between 0.5 and
2, half way per window (the whole way in the process's first, where the factor is a prior),
ignoring windows that charged too little to compare."""

from __future__ import annotations

import pytest

ONE = 1_000_000
S = 1_000_000_000


def feedback(driver, k: int, busy: int, charged: int, window: int, rounds: int = 1,
             whole: bool = False) -> list[int]:
    extra = ["whole"] if whole else []
    return [int(x) for x in driver.run("feedback", k, busy, charged, window, rounds,
                                       *extra).split()]


def test_converges_to_busy_over_charged(limiter_driver) -> None:
    # the GPU was busy 56 % while the estimates charged 50 % (short kernels' front-end time)
    got = feedback(limiter_driver, ONE, 56 * S // 100, 50 * S // 100, S, 20)
    assert got[0] == pytest.approx(ONE + (1.10 * ONE - ONE) / 2, abs=2)  # half way
    assert got[-1] == pytest.approx(ONE * 0.55 / 0.50, abs=50)  # one point is resolution


def test_within_nvml_resolution_nothing_changes(limiter_driver) -> None:
    assert feedback(limiter_driver, ONE, 31 * S // 100, 30 * S // 100, S, 5)[-1] == ONE


def test_over_estimates_are_scaled_down_to_busy(limiter_driver) -> None:
    # busy below what was charged: samples of kernels launched into an idle stream carry launch
    # latency; a launch-bound loop under a limit it does not reach must not be held back
    got = feedback(limiter_driver, ONE, 20 * S // 100, 30 * S // 100, S, 30)
    assert got[0] == pytest.approx(ONE - (ONE - ONE * 2 / 3) / 2, abs=2)  # half way
    assert got[-1] == pytest.approx(ONE * 2 / 3, abs=50)


def test_never_below_half(limiter_driver) -> None:
    assert feedback(limiter_driver, ONE, 5 * S // 100, 40 * S // 100, S, 40)[-1] == 500_000


def test_bounded(limiter_driver) -> None:
    # unmanaged work on the GPU makes it look busier than the container: at most 2
    got = feedback(limiter_driver, ONE, S, 10 * S // 100, S, 40)
    assert max(got) <= 2_000_000 and got[-1] == pytest.approx(2_000_000, abs=1)


def test_low_share_windows_are_ignored(limiter_driver) -> None:
    assert feedback(limiter_driver, 1_100_000, 10 * S // 100, 2 * S // 100, S)[-1] == 1_100_000


@pytest.mark.parametrize("busy_pct, charged_pct, want", [
    (77, 68, ONE * 76 / 68),  # the H100's batch-8 encoder at 70: busier than charged
    (20, 30, ONE * 2 / 3),    # an over-estimate: down the whole way too
])
def test_the_first_window_moves_the_whole_way_and_leaves_the_next_nothing_to_move(
        limiter_driver, busy_pct: int, charged_pct: int, want: float) -> None:
    got = feedback(limiter_driver, ONE, busy_pct * S // 100, charged_pct * S // 100, S, 2,
                   whole=True)
    assert got[0] == pytest.approx(want, abs=2)
    assert got[1] == pytest.approx(want, abs=2)  # nothing left to move


def test_a_first_window_that_says_nothing_leaves_the_prior(limiter_driver) -> None:
    assert feedback(limiter_driver, ONE, 10 * S // 100, 2 * S // 100, S, 1, whole=True) == [ONE]
