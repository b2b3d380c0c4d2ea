"""The DVFS correction (limiter.h): a kernel is charged the time it would take on the
saturated, power-capped GPU, (f / f_sat) ^ 0.6 times its measured time at clock f, never less;
f_sat follows the SM clock seen while the GPU is saturated, falling fast and rising slowly."""

from __future__ import annotations

import math

import pytest

ONE = 1_000_000


def scale(driver, f_now: int, f_sat: int) -> int:
    return int(driver.run("clockscale", f_now, f_sat))


@pytest.mark.parametrize(("f_now", "f_sat"), [(1980, 1515), (1980, 1200), (1500, 1495)])
def test_scale_is_clock_ratio_to_the_fitted_power(limiter_driver, f_now: int, f_sat: int) -> None:
    assert scale(limiter_driver, f_now, f_sat) == pytest.approx(
        ONE * (f_now / f_sat) ** 0.6, abs=2
    )


@pytest.mark.parametrize(("f_now", "f_sat"), [(1515, 1515), (345, 1515), (0, 1515), (1980, 0)])
def test_never_charges_less_than_measured(limiter_driver, f_now: int, f_sat: int) -> None:
    # an idle GPU's low clock, no reading, or no saturated sample yet: no correction
    assert scale(limiter_driver, f_now, f_sat) == ONE


def test_absurd_reading_is_bounded(limiter_driver) -> None:
    assert scale(limiter_driver, 4_000_000_000, 1) == 16 * ONE


def sat(driver, *samples: str) -> list[int]:
    return [int(x) for x in driver.run("sat", *samples).split()]


def test_unsaturated_samples_are_ignored(limiter_driver) -> None:
    assert sat(limiter_driver, "94:1980", "50:1500", "0:345") == [0, 0, 0]


def test_first_saturated_sample_sets_then_falls_fast_rises_slowly(limiter_driver) -> None:
    got = sat(limiter_driver, "100:1980", "100:1500", "97:1500", "100:1500", "100:1660", "60:300")
    assert got[0] == 1980
    assert got[1] == 1740  # half way down at once: a lower f_sat charges more (safe side)
    assert got[3] == 1560
    assert got[4] == 1560 + math.ceil((1660 - 1560) / 8)  # up by 1/8
    assert got[5] == got[4]  # an idle GPU's low clock leaves it


def test_pacer_with_correction_holds_full_load_throughput(limiter_driver) -> None:
    # H200, 4096² bf16 matmul: 205.5 us per kernel at the saturated clock (1515 MHz), 175 us at
    # 1980 MHz when held to a share.  Charging the corrected cost, the pace at 30 % gives the
    # throughput of 30 % of the saturated GPU within 1 point (the correction's exponent is this
    # kernel's measured 0.6).
    s = scale(limiter_driver, 1980, 1515)
    charged = 175_000 * s // ONE
    out = limiter_driver.fields("pace", 30, charged, 5_000_000_000, 2_000_000, 2_000_000)
    launches_per_s = out["share"] / (charged / 1e9)
    throughput_pct = 100 * launches_per_s * 205.5e-6
    assert throughput_pct == pytest.approx(30, abs=1)
    # the GPU time it takes at the higher clock stays below the limit
    assert launches_per_s * 175e-6 < 0.30


def estimate(driver, f_now: int, power_mw: int, util: int, limit_mw: int) -> int:
    return int(driver.run("satest", f_now, power_mw, util, limit_mw))


def model(f_now: float, power_w: float, util: float, limit_w: float) -> float:
    """limiter.h's model: a static 20 % of the limit, the rest in proportion to busy time."""
    p_sat = 0.2 * limit_w + (power_w - 0.2 * limit_w) * 100 / util
    return f_now * min(1.0, limit_w / p_sat) ** 0.9


@pytest.mark.parametrize(
    ("power_w", "util"),
    # H200 readings, 4096² bf16 matmul paced at 30 / 50 / 70 % (1980 MHz); the saturated GPU
    # ran it at 1445-1538 MHz one day, 1573-1637 another, power-capped at 700 W
    [(337.9, 27), (482.1, 45), (620.6, 64), (638.7, 62)],
)
def test_unsaturated_power_predicts_a_lower_saturated_clock(limiter_driver, power_w, util) -> None:
    f = estimate(limiter_driver, 1980, int(power_w * 1000), util, 700_000)
    assert f == pytest.approx(model(1980, power_w, util, 700), abs=2)
    # below the clock it runs at now, and within 10 % of the first day's saturated clock or
    # under it (the safe side)
    assert 1300 <= f < 1480 * 1.1


@pytest.mark.parametrize(
    ("power_w", "util"),
    # H200 readings, 2048² bf16 matmul synchronised after each, at 1980 MHz: paced at 30 and
    # 50 %, then unlimited (46 % busy alone); saturated (back to back) it ran at 1800-1821 MHz
    [(289.0, 23), (389.7, 42), (379.3, 46)],
)
def test_a_light_load_is_not_charged_for_a_clock_drop_it_would_not_have(
        limiter_driver, power_w, util) -> None:
    # all power counted as busy, 289 W at 23 % said "1257 W saturated": 1340 MHz, and 30 % of
    # the GPU's time bought 23.6 % of the throughput
    f = estimate(limiter_driver, 1980, int(power_w * 1000), util, 700_000)
    assert 1800 * 0.97 <= f <= 1980, f


def test_no_capping_expected_means_no_correction(limiter_driver) -> None:
    # a light workload: saturated it would draw 300 W of a 700 W limit
    assert estimate(limiter_driver, 1980, 90_000, 30, 700_000) == 1980


@pytest.mark.parametrize(
    ("power_mw", "util", "limit_mw"),
    [(300_000, 2, 700_000), (158_000, 7, 700_000), (300_000, 96, 700_000), (0, 30, 700_000),
     (300_000, 30, 0)],
)
def test_uninformative_samples_give_no_estimate(limiter_driver, power_mw, util, limit_mw) -> None:
    # an idle or nearly idle GPU (idle power dominates), an already saturated one (measured
    # instead), missing readings
    assert estimate(limiter_driver, 1980, power_mw, util, limit_mw) == 0


def test_estimate_is_bounded_by_half_the_clock(limiter_driver) -> None:
    assert estimate(limiter_driver, 1980, 700_000, 25, 100_000) == 990
