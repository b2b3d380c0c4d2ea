"""Per-signature cost estimates are the median of the last samples: a kernel stretched by
another context's time slice does not move the estimate; a real change of cost does."""

from __future__ import annotations


def estimates(driver, *samples: int) -> list[int]:
    return [int(line.split()[0]) for line in driver.run("cost", *samples).splitlines()]


def test_single_stretched_sample_is_ignored(limiter_driver) -> None:
    est = estimates(limiter_driver, 100, 100, 100, 5000, 100, 100)
    assert est[3] == 100 and est[-1] == 100


def test_lasting_change_is_followed(limiter_driver) -> None:
    est = estimates(limiter_driver, 100, 100, 100, 100, 100, 800, 800, 800)
    assert est[-1] == 800


def test_median_of_even_count_takes_lower_middle(limiter_driver) -> None:
    assert limiter_driver.run("median", 7, 1, 9, 3).strip() == "3"
    assert limiter_driver.run("median", 5).strip() == "5"
