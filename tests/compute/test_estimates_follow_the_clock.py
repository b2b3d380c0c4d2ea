"""Clock-aware cost estimates (limiter.h, clock section): every sample carries the SM clock it
ran at and is brought to the saturated GPU's clock before the smallest of the window is taken,
so a sample from a higher clock does not outlive a clock drop (issue 18: 32768² matmuls measured
at 1980 MHz and charged at 70 %, where the GPU ran 1552 MHz: 77.2 % of the saturated
throughput).  The busy feedback gets the sample as measured (`raw`)."""

from __future__ import annotations

import pytest

SAT = 1500  # f_sat, MHz
ALPHA = 0.6


def costs(driver, *samples: str, sat: int = SAT) -> list[tuple[int, int]]:
    lines = driver.run("cost", f"sat={sat}", *samples).splitlines()
    return [(int(w[0]), int(w[2])) for w in (line.split() for line in lines)]


def at_sat(ns: float, mhz: int) -> float:
    return ns * (mhz / SAT) ** ALPHA


def test_each_sample_is_brought_to_the_saturated_clock(limiter_driver) -> None:
    est, raw = costs(limiter_driver, "175000@1980")[-1]
    assert est == pytest.approx(at_sat(175000, 1980), rel=0.001)
    assert raw == 175000


def test_sample_from_a_higher_clock_compares_at_one_clock(limiter_driver) -> None:
    # a kernel that moves with the clock as the fit says: 100 us at 1980 MHz is the same work
    # as 100 * (1980/1700)^0.6 us at 1700: one estimate, whichever sample is older
    slow = 100000 * (1980 / 1700) ** ALPHA
    got = costs(limiter_driver, "100000@1980", f"{slow:.0f}@1700")
    assert got[0][0] == pytest.approx(got[1][0], rel=0.001)


def test_samples_of_unknown_clock_give_way_to_tagged_ones(limiter_driver) -> None:
    # before the clock thread's first reading a sample may come from any clock
    got = costs(limiter_driver, "80000", "100000@1980")
    assert got[0] == (80000, 80000)
    assert got[1][0] == pytest.approx(at_sat(100000, 1980), rel=0.001)


def test_without_a_saturated_clock_samples_count_as_measured(limiter_driver) -> None:
    assert costs(limiter_driver, "100000@1980", sat=0)[-1] == (100000, 100000)


@pytest.mark.parametrize(
    ("f_mhz", "util", "ref", "tag"),
    # a loaded GPU's clock: at least f_sat, or, before f_sat is known, at 20 % busy or more;
    # an idle H200 reads 345 MHz
    [(1980, 10, 1500, 1980), (345, 0, 1500, 0), (1980, 30, 0, 1980), (1980, 10, 0, 0)],
)
def test_clock_tag_is_a_loaded_gpus_clock(limiter_driver, f_mhz, util, ref, tag) -> None:
    assert int(limiter_driver.run("clocktag", f_mhz, util, ref)) == tag
