"""Under `default`, gpucores is a guaranteed share, not a cap: two busy containers at 30 + 70
get 30 and 70; when the 30 one goes idle the 70 one gets the whole GPU (issue 18: >= 90 % of its
alone throughput within 1 s), and when the 30 one resumes it gets its share back within 100 ms.

On the simulated GPU: the 30 container runs bursts of 300 1-ms kernels (about 1 s of work at
its share), synchronises and idles 1 s; the 70 one launches 1-ms kernels flat out.  Shares are
read from each launch's return time (both keep at most ~2 ms queued, so a launch returns about
when its kernel runs), in bins of 50 ms around the 30 one's idle period.  Three runs, judged by
the medians of their measures (rounds.py)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from rounds import each_run, judged_runs, medians

KERNEL_NS = 1_000_000
BIN_NS = 50_000_000
TURN_NS = 40_000_000  # paced containers sharing a GPU take turns in periods of 40 ms
FIRST_BACK_NS = 240_000_000  # whole 40-ms turn periods and whole 30-ms bursts of a 30 % pace


def launch_times(path: Path) -> list[int]:
    return [int(w) for w in path.read_text().split()]


def share(times: list[int], start: int, end: int) -> float:
    """GPU share of 1-ms kernels launched in [start, end)."""
    return sum(start <= t < end for t in times) * KERNEL_NS / (end - start)


def idle_gaps(times: list[int], min_ns: int) -> list[tuple[int, int]]:
    """(last launch before, first launch after) of each pause longer than min_ns."""
    return [(a, b) for a, b in itertools.pairwise(times) if b - a > min_ns]


def handover(loop, gpu_env: dict[str, str], tmp: Path, other: dict[str, str]) -> dict[str, float]:
    """One run: the measures of the 30 one's first idle period with both busy around it."""
    times = {name: tmp / f"{name}.times" for name in ("a", "b")}
    a = loop.start(gpu_env, "kernel", 1000, 5.2, CUDA_DEVICE_SM_LIMIT="30",
                   LAUNCH_LOOP_SYNC="300", LAUNCH_LOOP_IDLE_US="1000000",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "a.region"),
                   LAUNCH_LOOP_TIMES=str(times["a"]))
    b = loop.start(gpu_env, "kernel", 1000, 5.6, **other,
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "b.region"),
                   LAUNCH_LOOP_TIMES=str(times["b"]))
    loop.result(a)
    loop.result(b)
    ta, tb = launch_times(times["a"]), launch_times(times["b"])
    # an idle period with both busy for 400 ms before it and 500 ms after: the 70 one launching
    # for 0.5 s before that (the 30 one's first burst may have started alone) and both still
    # launching 500 ms after it (the runs are long enough for one: the first idle period may
    # come too early, after a first burst that queued while alone)
    gaps = [(f, t) for f, t in idle_gaps(ta, 500_000_000)
            if f - 400_000_000 >= tb[0] + 500_000_000 and t + 500_000_000 <= min(ta[-1], tb[-1])]
    assert gaps, f"the 30 container never idled while the 70 one ran: {idle_gaps(ta, 0)[:5]}"
    idle_from, idle_to = gaps[0]
    assert idle_to - idle_from >= 900_000_000, gaps

    before = (idle_from - 400_000_000, idle_from)
    # while the 30 one idles: when the 70 one first reaches >= 90 %, and how it keeps it
    bins = [(t, share(tb, t, t + BIN_NS)) for t in range(idle_from, idle_to - BIN_NS, BIN_NS)]
    full = [i for i, (_, s) in enumerate(bins) if s >= 0.9] or [len(bins) - 1]
    rest = [s for _, s in bins[full[0]:]]
    # after the 30 one resumes: 240 ms from 100 ms on, and 400 ms from then.  For its first
    # ~200 ms it is still light (its idle average reads the idle second) and its own pace lets
    # it through in bursts, ~9 kernels every 30 ms; then it takes turns, 12 ms every 40.  240 ms
    # holds a whole number of either, and a burst caught or missed at an end where the pattern
    # changes moves it by under 0.04 (an 80-ms stretch caught two bursts or three: 0.225 or
    # 0.34, about one run in three each, for 0.30 on average; 120 ms read 0.233-0.30)
    first = (idle_to + 100_000_000, idle_to + 100_000_000 + FIRST_BACK_NS)
    after = (idle_to + 100_000_000, idle_to + 500_000_000)
    back = [round(share(ta, t, t + TURN_NS), 2)
            for t in range(idle_to, idle_to + 480_000_000, TURN_NS)]
    print(f"the 70 container's share in 50-ms bins while the 30 one idled: "
          f"{[round(s, 2) for _, s in bins]}; the 30 one's in 40-ms bins after it resumed: {back}")
    return {
        "a before": share(ta, *before), "b before": share(tb, *before),
        "ms to 90 %": (bins[full[0]][0] + BIN_NS - idle_from) / 1e6,
        "b idle mean": sum(rest) / len(rest), "b idle min": min(rest),
        "a first back": share(ta, *first), "a after": share(ta, *after),
        "b after": share(tb, *after),
    }


@pytest.mark.slow
@pytest.mark.parametrize("other", [{"CUDA_DEVICE_SM_LIMIT": "70"}, {}],
                         ids=["at 70", "with no gpucores"])
def test_the_other_container_takes_the_gpu_while_the_30_idles_and_gives_it_back(
        loop, make_sim_gpu, tmp_path, other: dict[str, str]) -> None:
    # with no gpucores, the other one's share is what the 30 one leaves (lim_rest_share)
    def one(i: int) -> dict[str, float]:
        (tmp_path / str(i)).mkdir()
        return handover(loop.fresh(str(i)), make_sim_gpu().env, tmp_path / str(i), other)

    runs = judged_runs(loop, one)
    m, detail = medians(runs), each_run(runs)
    print(detail)
    # both busy before the idle period (its last 400 ms): 30 + 70
    assert m["a before"] == pytest.approx(0.30, abs=0.05), detail
    assert m["b before"] == pytest.approx(0.70, abs=0.05), detail
    # the 30 one idles: the 70 one reaches >= 90 % within a few bins and stays near the whole GPU
    # (the target is 1 s; the mechanism needs ~60 ms)
    assert m["ms to 90 %"] <= 200, detail
    assert m["b idle mean"] >= 0.9 and m["b idle min"] >= 0.7, detail  # >= 90 % of alone
    # the 30 one resumes: its share back within 100 ms, held there while both are busy
    assert m["a first back"] == pytest.approx(0.30, abs=0.07), detail
    assert m["a after"] == pytest.approx(0.30, abs=0.05), detail
    assert m["b after"] == pytest.approx(0.70, abs=0.05), detail
