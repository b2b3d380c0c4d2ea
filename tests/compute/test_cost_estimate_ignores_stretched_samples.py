"""Per-signature cost estimates are the smallest of the last LIM_COST_SAMPLES (16) samples:
samples stretched by other work on the GPU do not move the estimate, even when most of them
are stretched; a kernel that got cheaper is followed at once, one that got dearer once the
window has turned over."""

from __future__ import annotations

WINDOW = 16


def estimates(driver, *samples: int) -> list[int]:
    return [int(line.split()[0]) for line in driver.run("cost", *samples).splitlines()]


def test_stretched_samples_are_ignored(limiter_driver) -> None:
    # 3 of 4 samples stretched by a neighbour's kernels (a GPU 75 % busy with other work)
    samples = [100, 430, 250, 180] * 4
    assert estimates(limiter_driver, *samples)[-1] == 100


def test_cheaper_kernel_is_followed_at_once(limiter_driver) -> None:
    assert estimates(limiter_driver, 800, 800, 800, 100)[-1] == 100


def test_dearer_kernel_is_followed_after_one_window(limiter_driver) -> None:
    est = estimates(limiter_driver, *([100] * WINDOW + [800] * WINDOW))
    assert est[2 * WINDOW - 2] == 100 and est[-1] == 800


def test_lowest(limiter_driver) -> None:
    assert limiter_driver.run("lowest", 7, 1, 9, 3).strip() == "1"
    assert limiter_driver.run("lowest", 5).strip() == "5"
