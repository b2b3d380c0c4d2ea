"""Paced containers sharing a GPU take turns (lim_turn_window, lim_turn_wait): the period is cut
into one window per container, in proportion to the shares, in container-id order, and a launch
goes only when its estimated work ends inside the caller's window."""

from __future__ import annotations

import pytest

PERIOD = 40_000_000
MS = 1_000_000
SECOND = 1000 * MS


def window(driver, me: int, *members: str) -> tuple[int, int]:
    off, length, period = driver.run("window", me, *members).split()
    assert int(period) == PERIOD or int(length) == 0
    return int(off), int(length)


def window_period(driver, me: int, *members: str) -> tuple[int, int, int]:
    off, length, period = driver.run("window", me, *members).split()
    return int(off), int(length), int(period)


def test_windows_follow_id_order_and_shares(limiter_driver) -> None:
    assert window(limiter_driver, 7, "7:30", "9:70") == (0, 12 * MS)
    assert window(limiter_driver, 9, "7:30", "9:70") == (12 * MS, 28 * MS)
    # the order of the members does not matter, and repeated ids (processes) count once
    assert window(limiter_driver, 9, "9:70", "7:30", "9:70", "7:20") == (12 * MS, 28 * MS)


def test_windows_never_overlap_and_fill_the_period(limiter_driver) -> None:
    # shares that add up to 90: the rest is split in proportion (a share is a weight under
    # `default`; under `force` each one's pace still caps it), not left idle
    members = ("3:10", "5:25", "8:40", "11:15")
    spans = sorted(window(limiter_driver, int(m.split(":")[0]), *members) for m in members)
    end = 0
    for off, length in spans:
        assert off >= end
        end = off + length
    assert PERIOD - 1000 <= end <= PERIOD
    assert [length // 1000 for _, length in spans] == [4444, 11111, 17777, 6666]
    # two at 30: half the period each
    assert window(limiter_driver, 1, "1:30", "2:30") == (0, 20 * MS)
    assert window(limiter_driver, 2, "1:30", "2:30") == (20 * MS, 20 * MS)


def test_a_cap_keeps_its_window_and_weights_fill_the_rest(limiter_driver) -> None:
    # a capped 40 (`force`) beside a weighted 30: 40 % of the period, and the 30 the other 60 %
    assert window(limiter_driver, 1, "1:40:0:c", "2:30") == (0, 16 * MS)
    assert window(limiter_driver, 2, "1:40:0:c", "2:30") == (16 * MS, 24 * MS)
    # caps alone leave the rest of the period idle; over 100, caps give up in proportion too
    assert window(limiter_driver, 2, "1:30:0:c", "2:30:0:c") == (12 * MS, 12 * MS)
    assert window(limiter_driver, 2, "1:70:0:c", "2:70") == (20 * MS, 20 * MS)


def test_oversubscribed_shares_are_scaled_to_fit(limiter_driver) -> None:
    # 70 + 70: each gets half of the period, in proportion to its share
    assert window(limiter_driver, 1, "1:70", "2:70") == (0, 20 * MS)
    assert window(limiter_driver, 2, "1:70", "2:70") == (20 * MS, 20 * MS)


@pytest.mark.parametrize("members", [("4:30",), ("4:30", "6:0"), ("4:30", "6:100")])
def test_no_turns_without_a_second_paced_container(limiter_driver, members) -> None:
    assert window(limiter_driver, 4, *members)[1] == 0


def wait(driver, off: int, length: int, now: int, queued: int, cost: int) -> int:
    return int(driver.run("turnwait", off, length, now, queued, cost))


def test_launch_goes_only_when_it_ends_at_most_half_itself_past_the_window(limiter_driver) -> None:
    off, length = 12 * MS, 28 * MS
    base = 1000 * PERIOD
    # inside the window with room: go
    assert wait(limiter_driver, off, length, base + 13 * MS, 1 * MS, 200_000) == 0
    # inside, but the queued work plus this launch would run past the window by more than half
    # the launch: next window
    assert wait(limiter_driver, off, length, base + 39 * MS, 1_500_000, 300_000) == 13 * MS
    # by at most half the launch: go (a window loses no more than it overruns, on average)
    assert wait(limiter_driver, off, length, base + 39 * MS, 800_000, 300_000) == 0
    assert wait(limiter_driver, off, length, base + 37 * MS, 0, 4 * MS) == 0
    assert wait(limiter_driver, off, length, base + 38 * MS, 0, 4 * MS) == 0
    assert wait(limiter_driver, off, length, base + 38 * MS + 500_000, 0, 4 * MS) == 13_500_000
    # before the window: wait for its start
    assert wait(limiter_driver, off, length, base + 2 * MS, 0, 200_000) == 10 * MS


def test_kernel_longer_than_the_window_goes_at_its_start(limiter_driver) -> None:
    off, length = 0, 12 * MS
    base = 77 * PERIOD
    assert wait(limiter_driver, off, length, base + 1 * MS, 0, 20 * MS) == 0
    # not with work still queued, nor late in the window
    assert wait(limiter_driver, off, length, base + 1 * MS, 5 * MS, 20 * MS) == 39 * MS
    assert wait(limiter_driver, off, length, base + 10 * MS, 0, 20 * MS) == 30 * MS


def test_no_window_means_no_wait(limiter_driver) -> None:
    assert wait(limiter_driver, 0, 0, 123 * MS, 50 * MS, 10 * MS) == 0


@pytest.mark.parametrize(
    ("longest_ms", "limit", "cls"),
    # a window must hold 4 of the longest kernels: 30 % of 40 ms holds 4 x 3 ms
    [(0.2, 30, 0), (3, 30, 0), (3.1, 30, 1), (8, 30, 2), (8, 70, 1), (12, 30, 2), (13, 30, 3),
     (80, 30, 4)],
)
def test_long_kernels_ask_for_a_longer_period(limiter_driver, longest_ms, limit, cls) -> None:
    assert int(limiter_driver.run("turnclass", int(longest_ms * MS), limit)) == cls


def test_kernels_on_a_class_s_line_keep_the_period_they_asked_for(limiter_driver) -> None:
    # 30 %: 160 ms holds 4 of 12 ms. 12.010 ms asks for 320 and, decaying to 11.999, kept 320
    # (H100: 16384² matmuls moved every member's windows between 160 and 320 ms)
    def kept(longest_ms: float, current: int) -> int:
        return int(limiter_driver.run("turnclasskept", int(longest_ms * MS), 30, current))

    assert kept(12.01, 2) == 3  # a longer kernel raises it at once
    assert kept(11.999, 3) == 3
    assert kept(11.85, 3) == 3  # 1/64 longer, 12.035 ms, would still ask for 320
    assert kept(11.8, 3) == 2  # 11.984 would not: down to 160
    assert kept(1, 4) == 0  # far under: down to what it asks for
    assert kept(2.96, 4) == 1  # 3.006 ms would ask for 80: no lower
    assert kept(11.999, 2) == 2  # from below, the line is where it was


def test_a_member_that_knows_none_of_its_kernels_asks_for_its_neighbours_longest(
        limiter_driver) -> None:
    # beside 12-ms kernels a 30 % window of an 80-ms period (24 ms) loses up to 6 ms to their
    # tail and holds one of its own sliced kernels: it asks for 160 ms, what 12 ms asks at 30 %
    assert int(limiter_driver.run("turnclass", 0, 30, 12 * MS)) == 2
    assert int(limiter_driver.run("turnclass", 0, 70, 12 * MS)) == 1  # at its own share
    # once its own are known, they set it, shorter or longer than its neighbours'
    assert int(limiter_driver.run("turnclass", int(0.2 * MS), 30, 12 * MS)) == 0
    assert int(limiter_driver.run("turnclass", 80 * MS, 30, 12 * MS)) == 4
    assert int(limiter_driver.run("turnclass", 0, 30, 0)) == 0  # nobody knows any


def longest_after(driver, start: tuple[int, int, int], *launches: tuple[int, int, int, int]
                  ) -> list[int]:
    """The longest recent kernel after each launch (key, charge, settled, light), from (ns, key,
    light)."""
    args = [a for launch in launches for a in launch]
    return [int(x) for x in driver.run("longest", *start, *args).split()]


def decayed(ns: int) -> int:
    return ns - ns // 1024


def test_the_longest_kernel_rises_only_with_a_settled_signature(limiter_driver) -> None:
    # a young signature's 30 ms (its module's loading, say) does not raise it; settled, it does
    assert longest_after(limiter_driver, (12 * MS, 1, 0), (2, 30 * MS, 0, 0)) == [decayed(12 * MS)]
    assert longest_after(limiter_driver, (12 * MS, 1, 0), (2, 30 * MS, 1, 0)) == [30 * MS]


def test_a_light_container_s_sliced_kernels_do_not_hold_its_period(limiter_driver) -> None:
    # light, its 12-ms kernels read 25 ms (sliced with the neighbour's work between its claims);
    # back in the turns, their first clean estimate brings the class back (640 -> 160 ms at 30 %)
    got = longest_after(limiter_driver, (0, 0, 0), (5, 25 * MS, 1, 1), (5, 12 * MS, 1, 0))
    assert got == [25 * MS, 12 * MS]
    assert [int(limiter_driver.run("turnclass", g, 30)) for g in got] == [4, 2]
    # another signature's shorter kernels only let it decay
    assert longest_after(limiter_driver, (25 * MS, 5, 1), (6, MS, 1, 0)) == [decayed(25 * MS)]


def test_a_fall_in_the_turns_only_decays(limiter_driver) -> None:
    # set in the turns, a lower estimate of the same kernels keeps the period (siblings' kernels
    # sliced at their parts' edges are the GPU's own; a period that follows them moves windows)
    got = longest_after(limiter_driver, (0, 0, 0), (5, 25 * MS, 1, 0), (5, 12 * MS, 1, 0))
    assert got == [25 * MS, decayed(25 * MS)]


def test_a_container_light_lately_waits_for_eight_samples_to_set_its_period(limiter_driver
                                                                           ) -> None:
    # its first samples are sliced with its neighbours' work, then with the tail of the window
    # before its own: 10-ms kernels read 12.4-14 ms, which asks for twice the period
    def need(light: int, left_ns: int, now_ns: int) -> int:
        return int(limiter_driver.run("periodsamples", light, left_ns, now_ns, 4))

    assert need(1, 0, 5 * SECOND) == 8  # light now
    assert need(0, 5 * SECOND, 5 * SECOND + 10 * MS) == 8  # left light 10 ms ago
    assert need(0, 5 * SECOND, 6 * SECOND - 1) == 8
    assert need(0, 5 * SECOND, 5 * SECOND - 10_000) == 8  # marked just after this launch's clock
    assert need(0, 5 * SECOND, 6 * SECOND) == 4  # a second on: as any other longest kernel
    assert need(0, 0, 5 * SECOND) == 4  # never light


def test_the_largest_class_asked_sets_everyone_s_period(limiter_driver) -> None:
    members = ("7:30:2", "9:70:1")
    assert window_period(limiter_driver, 7, *members) == (0, 48 * MS, 160 * MS)
    assert window_period(limiter_driver, 9, *members) == (48 * MS, 112 * MS, 160 * MS)
    # a process of container 9 asking for more counts for its container
    assert window_period(limiter_driver, 7, *members, "9:70:3")[2] == 320 * MS


def test_the_wait_follows_the_period(limiter_driver) -> None:
    off, length, period = 48 * MS, 112 * MS, 160 * MS
    base = 1000 * period
    assert wait_p(limiter_driver, off, length, base + 10 * MS, 0, 3 * MS, period) == 38 * MS
    assert wait_p(limiter_driver, off, length, base + 60 * MS, 0, 3 * MS, period) == 0
    assert wait_p(limiter_driver, off, length, base + 159 * MS, 0, 3 * MS, period) == 49 * MS


def wait_p(driver, off: int, length: int, now: int, queued: int, cost: int, period: int) -> int:
    return int(driver.run("turnwait", off, length, now, queued, cost, period))


def split_wait(driver, rank: int, n: int, idle: int, now: int, queued: int = 0,
               cost: int = 3 * MS) -> int:
    """lim_split_wait in a window [10, 34) ms of a 40-ms period (parts of 8 ms when n is 3)."""
    return int(driver.run("splitwait", 10 * MS, 24 * MS, PERIOD, rank, n, idle, now, queued,
                          cost))


def test_a_container_s_processes_launch_in_their_own_part_of_its_window(limiter_driver) -> None:
    base = 1000 * PERIOD
    # three processes: parts [10, 18), [18, 26), [26, 34) ms; none idle
    assert split_wait(limiter_driver, 0, 3, 0, base + 11 * MS) == 0
    assert split_wait(limiter_driver, 1, 3, 0, base + 11 * MS) == 7 * MS  # waits for 18 ms
    assert split_wait(limiter_driver, 2, 3, 0, base + 11 * MS) == 15 * MS
    assert split_wait(limiter_driver, 1, 3, 0, base + 20 * MS) == 0
    # its own part holds its launch as a window would: from 20 ms, 4 ms queued and 3 more end at
    # 27, 1 ms past the part, under half the launch (go); 5 ms queued, 2 ms past: the next part
    assert split_wait(limiter_driver, 1, 3, 0, base + 20 * MS, 4 * MS) == 0
    assert split_wait(limiter_driver, 1, 3, 0, base + 20 * MS, 5 * MS) == 38 * MS
    # outside the container's window: the next own part
    assert split_wait(limiter_driver, 0, 3, 0, base + 36 * MS) == 14 * MS


def test_an_idle_sibling_s_part_is_the_others(limiter_driver) -> None:
    base = 1000 * PERIOD
    # the process of part 1 idle (bit 1): part 0's runs on through it, 2's may start in it
    assert split_wait(limiter_driver, 0, 3, 0b010, base + 19 * MS) == 0
    assert split_wait(limiter_driver, 2, 3, 0b010, base + 19 * MS) == 0
    assert split_wait(limiter_driver, 2, 3, 0, base + 19 * MS) == 7 * MS
    # the run goes on through idle parts and one's own: part 0 from 11 ms with 1 and 2 idle has
    # the whole window (queued work to 31 ms, and 3 ms more end at 34)
    assert split_wait(limiter_driver, 0, 3, 0b110, base + 11 * MS, 20 * MS, 3 * MS) == 0
    # ... but stops at a busy sibling's part: 1 busy, so part 0's ends at 18 ms
    assert split_wait(limiter_driver, 0, 3, 0b100, base + 11 * MS, 6 * MS, 3 * MS) == 39 * MS
    # an idle part of its own does nothing for one whose part has not come (2, at 11 ms, with
    # only part 2 idle: waits for 26 ms)
    assert split_wait(limiter_driver, 2, 3, 0b100, base + 11 * MS) == 15 * MS


def test_a_sibling_that_comes_back_at_once_counts_busy_a_kernel_past_its_work(
        limiter_driver) -> None:
    # a loop synchronising each 11-ms kernel has nothing queued for ~0.2 ms before its next
    # launch, and a kernel cut by time slices ends past its estimate: neither frees its part
    def busy_until(horizon: int, longest: int, gap: int) -> int:
        return int(limiter_driver.run("splitbusy", horizon, longest, gap))

    assert busy_until(100 * MS, 11 * MS, 200_000) == 111 * MS
    assert busy_until(100 * MS, 200_000, 0) == 101 * MS  # a millisecond at least
    assert busy_until(2**64 - 2 * MS, 11 * MS, 0) == 2**64 - 1  # saturates, never wraps
    # one that came back a kernel or more after its work (it sleeps between requests): its part
    # is free at its horizon
    assert busy_until(100 * MS, 2 * MS, 30 * MS) == 100 * MS
    assert busy_until(100 * MS, 2 * MS, 2 * MS) == 100 * MS


@pytest.mark.parametrize("n", [0, 1, 9])
def test_no_split_below_two_processes_or_beyond_the_most(limiter_driver, n: int) -> None:
    base = 1000 * PERIOD
    assert split_wait(limiter_driver, 0, n, 0, base + 20 * MS) == 0
    assert split_wait(limiter_driver, 0, n, 0, base + 36 * MS) == 14 * MS
