"""Per-signature cost estimates are the smallest of the last LIM_COST_SAMPLES (16) samples:
samples stretched by other work on the GPU do not move the estimate, even when most of them
are stretched; a kernel that got cheaper is followed at once, one that got dearer (every one of
the last LIM_COST_RISE_SAMPLES, 4, took longer than all before them: the GPU clocked down) after
those 4."""

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


RISE = 4


def test_dearer_kernel_is_followed_after_four_samples(limiter_driver) -> None:
    est = estimates(limiter_driver, *([100] * WINDOW + [800] * WINDOW))
    assert est[WINDOW + RISE - 2] == 100 and est[WINDOW + RISE - 1] == 800 and est[-1] == 800


def test_clock_drop_is_followed_within_four_kernels(limiter_driver) -> None:
    # H200, 32768² bf16: 91 ms per kernel at 1980 MHz; loaded to 70 % the GPU ran 1552 MHz
    # (116 ms for a compute-bound kernel); with a little noise on each sample
    est = estimates(limiter_driver, *([91_000_000] * WINDOW + [116_400_000, 116_000_000,
                                                                  116_900_000, 116_200_000]))
    assert est[-2] == 91_000_000 and est[-1] == 116_000_000


def test_a_rise_within_the_noise_keeps_the_smallest(limiter_driver) -> None:
    # samples 2 % above the smallest (launch jitter) do not move it
    est = estimates(limiter_driver, *([100_000] * 8 + [102_000] * 8))
    assert est[-1] == 100_000


def test_one_unstretched_sample_among_the_last_four_keeps_the_smallest(limiter_driver) -> None:
    est = estimates(limiter_driver, *([100] * 8 + [430, 250, 100, 180]))
    assert est[-1] == 100


def test_lowest(limiter_driver) -> None:
    assert limiter_driver.run("lowest", 7, 1, 9, 3).strip() == "1"
    assert limiter_driver.run("lowest", 5).strip() == "5"
