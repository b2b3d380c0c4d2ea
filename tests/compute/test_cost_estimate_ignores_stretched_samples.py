"""Per-signature cost estimates are the smallest of the last LIM_COST_SAMPLES (16) samples:
samples stretched by other work on the GPU do not move the estimate, even when most of them
are stretched; a kernel that got cheaper is followed at once, one that got dearer (every one of
the newest samples took longer than all before them: the GPU clocked down) once those span
LIM_COST_RISE_SPAN_NS, 200 ms, and are LIM_COST_RISE_SAMPLES, 4, at least; where the window's
16 span less, after the whole window."""

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


def test_dearer_long_kernel_is_followed_after_four_samples(limiter_driver) -> None:
    # 60-ms kernels: four span 200 ms and more
    est = estimates(limiter_driver, *([60_000_000] * WINDOW + [90_000_000] * WINDOW))
    assert est[WINDOW + RISE - 2] == 60_000_000 and est[WINDOW + RISE - 1] == 90_000_000


def test_dearer_kernel_is_followed_once_its_samples_span_200_ms(limiter_driver) -> None:
    # 20-ms kernels that now take 30: seven of them span 210 ms
    est = estimates(limiter_driver, *([20_000_000] * WINDOW + [30_000_000] * WINDOW))
    assert est[WINDOW + 5] == 20_000_000 and est[WINDOW + 6] == 30_000_000


def test_four_kernels_stretched_in_a_row_beside_a_light_claim_keep_the_smallest(
        limiter_driver) -> None:
    # sim: a 70 % container's 10-ms kernels as a light newcomer claimed beside it and then took
    # turns; four in a row read 13.4-15 ms, and the rule on the newest four alone followed them
    stretched = [13_441_577, 14_024_000, 15_007_000, 13_972_000]
    est = estimates(limiter_driver, *([10_000_000] * WINDOW + stretched + [10_000_000] * 4))
    assert set(est[WINDOW:]) == {10_000_000}


def test_dearer_mid_length_kernel_is_followed_after_one_window(limiter_driver) -> None:
    # 2-ms kernels: the window's 16 span 48 ms, under 200
    est = estimates(limiter_driver, *([2_000_000] * WINDOW + [3_000_000] * WINDOW))
    assert est[2 * WINDOW - 2] == 2_000_000 and est[-1] == 3_000_000


def test_dearer_short_kernel_is_followed_after_one_window(limiter_driver) -> None:
    # below 1 ms, samples move with launch latency: the smallest of the window stands
    est = estimates(limiter_driver, *([100] * WINDOW + [800] * WINDOW))
    assert est[2 * WINDOW - 2] == 100 and est[-1] == 800


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
    stretched = [8_600_000, 5_000_000, 2_000_000, 3_600_000]
    est = estimates(limiter_driver, *([2_000_000] * 8 + stretched))
    assert est[-1] == 2_000_000


def test_lowest(limiter_driver) -> None:
    assert limiter_driver.run("lowest", 7, 1, 9, 3).strip() == "1"
    assert limiter_driver.run("lowest", 5).strip() == "5"
