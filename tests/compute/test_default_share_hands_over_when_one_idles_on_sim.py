"""Under `default`, gpucores is a guaranteed share, not a cap: two busy containers at 30 + 70
get 30 and 70; when the 30 one goes idle the 70 one gets the whole GPU (issue 18: >= 90 % of its
alone throughput within 1 s), and when the 30 one resumes it gets its share back within 100 ms.

On the simulated GPU: the 30 container runs bursts of 300 1-ms kernels (about 1 s of work at
its share), synchronises and idles 1 s; the 70 one launches 1-ms kernels flat out.  Shares are
read from each launch's return time (both keep at most ~2 ms queued, so a launch returns about
when its kernel runs), in bins of 50 ms around the 30 one's idle period."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

KERNEL_NS = 1_000_000
BIN_NS = 50_000_000
TURN_NS = 40_000_000  # paced containers sharing a GPU take turns in periods of 40 ms


def launch_times(path: Path) -> list[int]:
    return [int(w) for w in path.read_text().split()]


def share(times: list[int], start: int, end: int) -> float:
    """GPU share of 1-ms kernels launched in [start, end)."""
    return sum(start <= t < end for t in times) * KERNEL_NS / (end - start)


def idle_gaps(times: list[int], min_ns: int) -> list[tuple[int, int]]:
    """(last launch before, first launch after) of each pause longer than min_ns."""
    return [(a, b) for a, b in itertools.pairwise(times) if b - a > min_ns]


@pytest.mark.slow
def test_the_70_container_takes_the_gpu_while_the_30_idles_and_gives_it_back(
        loop, sim_gpu, tmp_path) -> None:
    times = {name: tmp_path / f"{name}.times" for name in ("a", "b")}
    a = loop.start(sim_gpu.env, "kernel", 1000, 4.2, CUDA_DEVICE_SM_LIMIT="30",
                   LAUNCH_LOOP_SYNC="300", LAUNCH_LOOP_IDLE_US="1000000",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "a.region"),
                   LAUNCH_LOOP_TIMES=str(times["a"]))
    b = loop.start(sim_gpu.env, "kernel", 1000, 4.6, CUDA_DEVICE_SM_LIMIT="70",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "b.region"),
                   LAUNCH_LOOP_TIMES=str(times["b"]))
    loop.result(a)
    loop.result(b)
    ta, tb = launch_times(times["a"]), launch_times(times["b"])
    # an idle period with both busy for 400 ms before it and 500 ms after (the 70 one started
    # 0.5 s before: a first burst launched before it did ran alone, unheld)
    gaps = [(f, t) for f, t in idle_gaps(ta, 500_000_000)
            if f - 400_000_000 >= tb[0] + 500_000_000 and t + 500_000_000 <= tb[-1]]
    assert gaps, f"the 30 container never idled while the 70 one ran: {idle_gaps(ta, 0)[:5]}"
    idle_from, idle_to = gaps[0]
    assert idle_to - idle_from >= 900_000_000, gaps

    # both busy before the idle period (its last 400 ms): 30 + 70
    before = (idle_from - 400_000_000, idle_from)
    assert share(ta, *before) == pytest.approx(0.30, abs=0.05), (share(ta, *before), gaps)
    assert share(tb, *before) == pytest.approx(0.70, abs=0.05), share(tb, *before)

    # the 30 one idles: the 70 one reaches >= 90 % within a few bins and stays near the whole GPU
    bins = [(t, share(tb, t, t + BIN_NS)) for t in range(idle_from, idle_to - BIN_NS, BIN_NS)]
    full = [i for i, (_, s) in enumerate(bins) if s >= 0.9]
    assert full, bins
    taken_ns = bins[full[0]][0] + BIN_NS - idle_from
    rest = [s for _, s in bins[full[0]:]]
    print(f"the 70 container at >= 90 % {taken_ns / 1e6:.0f} ms after the 30 one's last launch; "
          f"bins: {[round(s, 2) for _, s in bins]}")
    assert taken_ns <= 200_000_000, bins  # the target is 1 s; the mechanism needs ~60 ms
    assert sum(rest) / len(rest) >= 0.9 and min(rest) >= 0.7, bins  # >= 90 % of alone

    # the 30 one resumes: its share back within 100 ms, held there while both are busy
    back = [round(share(ta, t, t + TURN_NS), 2)
            for t in range(idle_to, idle_to + 480_000_000, TURN_NS)]
    print(f"the 30 container's share in 40-ms bins after it resumed: {back}")
    # one 80-ms stretch from 100 ms on (a turn period of 40 or 80 ms: a whole number of them)
    first = (idle_to + 100_000_000, idle_to + 180_000_000)
    assert share(ta, *first) == pytest.approx(0.30, abs=0.07), back
    after = (idle_to + 100_000_000, idle_to + 500_000_000)
    assert share(ta, *after) == pytest.approx(0.30, abs=0.05), share(ta, *after)
    assert share(tb, *after) == pytest.approx(0.70, abs=0.05), share(tb, *after)
