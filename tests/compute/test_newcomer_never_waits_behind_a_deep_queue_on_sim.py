"""A `default` container with gpucores alone on its GPU is not paced, but it keeps no more than
~100 ms of work queued (`hold`; gate.c, ALONE_QUEUE_NS), so that a container that arrives later
never waits behind seconds of it.  Pacing and turns only govern what a process launches after it
sees its neighbour; what it queued before runs anyway.

Without the bound, on the simulated GPU: a 70 % container of 10-ms kernels that never
synchronises, alone for ~1.5 s, has queued ~10 s of work (the driver's 1024 launches); a 30 % one
started then gets half the GPU for as long as that queue lasts where the GPU alternates between
the two in time slices (the sim's default; its first 4 s: 1.7 times its due), and nothing at all
where it runs kernels in launch order.  With the bound it gets its share within about a second.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from rounds import each_run, judged_runs, medians
from testbed import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_compute_shapes as bench

KERNEL_NS = 10_000_000  # grid 10000 on the simulated GPU: a 10-ms kernel
SECOND = 1_000_000_000


def state(region: Path):
    from libvgpu.region import Region

    with Region.open(region) as r:
        return r.compute_state(0)


def share(times: list[int], start: int, end: int) -> float:
    return sum(start <= t < end for t in times) * KERNEL_NS / (end - start)


def queued_ahead(launched: list[int], t: int) -> int:
    """The work a loop that never synchronises has queued ahead of the GPU at time t: its kernels
    launched by then, less what the GPU, busy with them since its first launch, has run."""
    return sum(x <= t for x in launched) * KERNEL_NS - (t - launched[0])


def longest_claim_ms(log: str) -> int:
    """The longest claim its debug log says it ran without a break when it turned light or left
    light.  A claim is held back within ~50 ms (limiter.h, LIM_LIGHT_BURST_NS); until stop 54 one
    kept on before any began read as running since the clock's zero (the machine's uptime: on
    the H100, 283685 ms)."""
    return max((int(ms) for ms in re.findall(r"claimed (\d+) ms without a break", log)),
               default=0)


@pytest.mark.slow
def test_a_newcomer_gets_its_share_beside_a_loop_that_never_synchronised(
        loop, sim_gpu, tmp_path) -> None:
    regions = {name: tmp_path / f"{name}.region" for name in ("old", "new")}
    times = {name: tmp_path / f"{name}.times" for name in ("old", "new")}
    old = loop.start(sim_gpu.env, "kernel", 10000, 5.5, CUDA_DEVICE_SM_LIMIT="70",
                     CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["old"]),
                     LAUNCH_LOOP_SYNC="0", LAUNCH_LOOP_TIMES=str(times["old"]))
    seen: dict[str, object] = {}

    def launched_once() -> bool:
        from libvgpu.region import RegionError

        try:  # the region appears with the process's first launch
            seen["old"] = state(regions["old"])
        except RegionError:
            return False
        return True

    wait_for(launched_once, 10, "the first container's first launch")
    alone_from = time.monotonic()
    # the scenario's first phase: it runs alone for 1.2 s (without the bound, its queue is the
    # driver's whole depth by then)
    wait_for(lambda: time.monotonic() - alone_from >= 1.2, 5, "1.2 s of the first one alone")
    new = loop.start(sim_gpu.env, "kernel", 10000, 3.0, CUDA_DEVICE_SM_LIMIT="30",
                     CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["new"]),
                     LAUNCH_LOOP_SYNC="1", LAUNCH_LOOP_TIMES=str(times["new"]))
    loop.result(new)
    loop.result(old)
    launched = {name: [int(w) for w in path.read_text().split()] for name, path in times.items()}
    t0 = launched["new"][0]
    # its share once both pace and take turns (seconds 1.0-2.5 of its run); 0.0 without the bound
    got = share(launched["new"], t0 + SECOND, t0 + 5 * SECOND // 2)
    assert got == pytest.approx(0.30, abs=0.08), (got, launched["new"][:20])
    # what the first one had queued when the newcomer came (~10 s without the bound)
    queued = queued_ahead(launched["old"], t0)
    assert queued <= 300_000_000, (queued, t0 - launched["old"][0])


@pytest.mark.slow
def test_a_loop_alone_queues_no_more_than_the_bound_from_its_first_launch(loop, sim_gpu,
                                                                          tmp_path) -> None:
    """The bound holds from the loop's first launch, while its kernel's cost is not known yet:
    the bound counts such a launch as 1 ms (gate.c, HORIZON_UNKNOWN_NS), and until stop 55 only
    a paced container kept no more than 4 of them in flight.  Alone, not paced, a loop of 10-ms
    kernels queued 100 of them, a second of work, in its first 20 ms, then waited 0.8 s; one
    started beside a newcomer waited the 1 s a launch waits for measured work at most."""
    times = tmp_path / "times"
    loop.run(sim_gpu.env, "kernel", 10000, 0.6, CUDA_DEVICE_SM_LIMIT="70",
             CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "region"), LAUNCH_LOOP_SYNC="0",
             LAUNCH_LOOP_TIMES=str(times))
    launched = [int(w) for w in times.read_text().split()]
    queued = max(queued_ahead(launched, t) for t in launched)  # as each launch returned
    assert queued <= 150_000_000, (queued, launched[:30])


@pytest.mark.slow
@pytest.mark.parametrize("load_grid", [0, 10], ids=["loaded-its-kernel", "loaded-another"])
def test_a_newcomer_that_idled_first_is_light_no_more_once_its_loop_runs(loop, make_sim_gpu,
                                                                         tmp_path,
                                                                         load_grid: int) -> None:
    """A container that loaded its model and waited for work is found light while it idles (it
    uses nothing of its share).  Once its loop of 10-ms kernels starts flat out it must be light
    no more within 0.25 s, in every run: light, it stayed so 280-360 ms here (0.3-0.9 s on an
    H100), its neighbour, out of the turns, ran work between its claims, and the time its
    kernels spent sliced with that work read as idle.  Two rules end it (limiter.h): its own pace
    holding it back half the time once its kernels' fourth sample tells they are long, ~0.2 s
    (LIM_LIGHT_WAIT_LEAVE_PCT; H100, 12-ms matmuls: light until 0.3 s in five runs), and, first
    here, ~10 ms in, its claim running on (LIM_LIGHT_RUN_MAX_NS), so this scenario no longer
    shows the first rule on its own (its unit tests, lim_held_back, do).  Its first second is
    judged by the median of a few runs: where its windows fall moves that second's share by a
    few points (0.267-0.298 of the GPU in 12 runs).  Until its turn period waited for 8 samples
    (lim_period_samples) its first four, stretched while light and at its windows' starts,
    doubled the period for ~1 s in 3 runs of 18 (0.22-0.26), and CI read 0.229, then 0.247; so
    no run may take a period longer than its 10-ms kernels ask for at 30 % (160 ms).  That
    still failed about one run in 15 (320 ms for ~60 ms): its neighbour's 10-ms kernels read
    13.4-15 ms four in a row beside its claim and the turns that formed after it, the rule that
    follows a kernel that got dearer after four samples raised the neighbour's estimate, and
    the newcomer, going by its neighbour's longest kernel, asked for 320 ms.  A rise is now
    followed once its samples span 200 ms (limiter.h, LIM_COST_RISE_SPAN_NS).  Until its
    eighth sample it asks for the class of its neighbour's longest kernels (lim_period_longest),
    the same 160 ms, where it took turns in the 80-ms period its neighbour asks for at 70 %, one
    sliced step in each 24-ms window (H100, ~0.4 s of its first second).
    Its loop's first kernel may be of unknown cost (its loading ran other kernels, as a model's
    tensors' fill does on the GPU): estimated ~1 ms, it runs 10, and until stop 52 its claim
    ended by the estimate, so each next kernel began a claim a fraction of a ms after the last
    one's work, passed for a request and had a request's credit (1-3 such claims in each of 6
    runs here, light 59-79 ms; on the H100 3 kernels back to back and its first second 5-13
    points under its due).  Its claim now runs on while its work runs late
    (LIM_LIGHT_CLAIM_JOIN_NS), watched from its start (the claim wakes the ticker; until stop 53
    the watch began at the next tick, and a kernel that ended before it ended its claim by its
    estimate: one such claim in one run of three under CI).  And a launch that came within the
    claim keeps its credit though it waited in its pace meanwhile: judged after that wait, the
    loop's second kernel, paced ~40 ms after its first one's work, began a new claim "0.1-0.3 ms
    after its previous work" with a request's credit (with the watch from the start but without
    this: such a claim in 12 runs of 21).  So no claim of its loop may pass for a request, in any
    run.  Judged anew after each pace wait, though, its claim's run restarted at each kernel
    (~40 ms apart, its pace), and where no tick fell in the first one's 10 ms it stayed light
    until its pace's rule, 0.11-0.23 s in 9 runs of 66 (its period doubled in one such run); a
    claim with no request's credit (one after a long pause) now goes on through its pace's
    wait: light no more 0.006-0.064 s in, in 84 runs.  And the longest claim its log states
    stays a claim's length: one kept on before any began (stop 54's H100 run) read as the
    clock's whole uptime."""
    from libvgpu.region import Region, RegionError

    def one(i: int) -> dict[str, float]:
        run, gpu = loop.fresh(str(i)), make_sim_gpu().env
        regions = {name: tmp_path / f"{name}-{i}.region" for name in ("old", "new")}
        began = time.monotonic()
        old = run.start(gpu, "kernel", 10000, 5.0, CUDA_DEVICE_SM_LIMIT="70",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["old"]), LAUNCH_LOOP_SYNC="0")
        new = run.start(gpu, "kernel", 10000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["new"]), LAUNCH_LOOP_SYNC="1",
                        LAUNCH_LOOP_DELAY_US="1500000", LIBCUDA_LOG_LEVEL="4",
                        **({"LAUNCH_LOOP_DELAY_GRID": str(load_grid)} if load_grid else {}))
        seen = []  # (time, its gated launches, light), every ~5 ms while it runs
        while new.poll() is None:
            try:
                with Region.open(regions["new"]) as r:
                    st = r.compute_state(0)
                seen.append((time.monotonic(), st.launches, st.light))
            except RegionError:  # not made yet
                pass
            time.sleep(0.005)
        got = run.result(new)
        run.result(old)
        ended = time.monotonic()
        start = next(t for t, launches, _ in seen if launches >= 2)  # its loop's first launch
        assert any(light for t, _, light in seen if t < start), "not found light while it idled"
        leave = next((t for t, _, light in seen if t >= start and not light), None)
        # the turn periods it took (its debug log): 10-ms kernels at 30 % ask for 160 ms, its
        # neighbour's too, which it goes by until its own are settled (a tick after it is light
        # no more: the neighbour, alone meanwhile, was not paced and told none)
        log = str(got["stderr"])
        periods = [int(p) for p in re.findall(r"turns: window \d+ ms at \d+ ms of (\d+) ms", log)]
        borrowed = re.findall(r"of (\d+) ms \(longest kernel [1-9]\d* us, its neighbours'\)", log)
        # the claims it began while light before it first left light (its debug log): a loop
        # starting, so none passes for a request with a request's credit
        before = log.split("no longer light", 1)[0]
        credited = re.findall(r"a light claim begins \d+ us after its previous work: ([1-9]\d*) us",
                              before)
        # each turn line is stamped with the node's clock (the benchmark times them by it)
        stamps = [bench.STAMP.search(x) for x in log.splitlines()
                  if re.search(r"compute: device \d+: (no turns|turns:)", x)]
        misstamped = sum(m is None or not began <= float(m.group(1)) <= ended for m in stamps)
        return {"leave_s": 99.0 if leave is None else leave - start,
                "misstamped_turn_lines": float(misstamped), "turn_lines": float(len(stamps)),
                "credited_claims": float(len(credited)),
                "first_share": float(got["first_share"]),
                "longest_period_ms": max(periods, default=0),
                "longest_claim_ms": longest_claim_ms(log),
                "borrowed_period_ms": int(borrowed[0]) if borrowed else 0}

    runs = judged_runs(loop, one)
    assert max(r["leave_s"] for r in runs) <= 0.12, each_run(runs)  # every run
    assert min(r["turn_lines"] for r in runs) > 0, each_run(runs)
    assert max(r["misstamped_turn_lines"] for r in runs) == 0, each_run(runs)
    assert max(r["credited_claims"] for r in runs) == 0, each_run(runs)
    assert max(r["longest_period_ms"] for r in runs) <= 160, each_run(runs)
    assert max(r["longest_claim_ms"] for r in runs) <= 200, each_run(runs)
    assert min(r["borrowed_period_ms"] for r in runs) == 160, each_run(runs)
    assert medians(runs)["first_share"] >= 0.255, each_run(runs)


@pytest.mark.slow
def test_a_loop_of_kernels_shorter_than_a_tick_keeps_one_claim_from_its_first_launch(
        loop, make_sim_gpu, tmp_path) -> None:
    """The same newcomer with 3-ms kernels, its loop's first one of unknown cost (its loading ran
    another kernel): the ticker watches its claim from that first launch (the claim wakes it),
    so the kernel running past its ~1-ms estimate keeps the claim going, and the next kernel,
    launched as it ends, goes on with it.  When the watch began at the next 10-ms tick, a kernel
    this short had mostly ended by then, its claim with it (by its estimate), and the next one
    began a claim with a request's credit: 1-2 such claims in each of 9 runs here.  With the
    watch from the first launch, such claims were left in 6 runs of 33 (two in one run three
    times): a kernel launched unmeasured (its signature known) has no event the ticker can
    watch, so its claim ended by its estimate.  Its loop's synchronise, which waited for that
    kernel, now keeps the claim too (hooks_sync.c): none in 24 runs since.  So no run may have
    one."""
    def one(i: int) -> dict[str, float]:
        run, gpu = loop.fresh(str(i)), make_sim_gpu().env
        old = run.start(gpu, "kernel", 3000, 3.5, CUDA_DEVICE_SM_LIMIT="70",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"old-{i}"),
                        LAUNCH_LOOP_SYNC="0")
        new = run.start(gpu, "kernel", 3000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"new-{i}"),
                        LAUNCH_LOOP_SYNC="1", LAUNCH_LOOP_DELAY_US="1500000",
                        LAUNCH_LOOP_DELAY_GRID="10", LIBCUDA_LOG_LEVEL="4")
        log = str(run.result(new)["stderr"])
        run.result(old)
        assert "light (claims the GPU while busy" in log, "not found light while it idled"
        before = log.split("no longer light", 1)[0]
        credited = re.findall(r"a light claim begins \d+ us after its previous work: ([1-9]\d*) us",
                              before)
        return {"credited_claims": float(len(credited)), "longest_claim_ms": longest_claim_ms(log)}

    runs = judged_runs(loop, one)
    assert max(r["credited_claims"] for r in runs) == 0, each_run(runs)
    assert max(r["longest_claim_ms"] for r in runs) <= 200, each_run(runs)


@pytest.mark.slow
def test_a_newcomer_beside_kernels_on_a_class_line_keeps_one_period_from_its_first_launch(
        loop, make_sim_gpu, tmp_path) -> None:
    """A 30 % newcomer (idle 2 s first, then 12-ms kernels synchronised after each) beside a 70 %
    loop of the same: 12.000 ms at 30 % sits on the 160-ms class line (4 kernels in a 48-ms
    window).  Two faults doubled its period or broke its turns in its first second (alternated
    runs of 8, before / after: period 320 ms in 8 / 0, turns dissolved and formed again, with
    their period restarting from its first class, in 4 / 0; first second 0.235-0.312 / 0.263-0.286
    of the GPU):
    - it went by its neighbour's longest kernel as the node region tells it, rounded up to 64 µs
      (12.058 ms: 320 ms), where its neighbour asked 160 ms for the same kernels; the region now
      holds the nearest (vgpu_node.h, vgpu_node_turn);
    - a launch waiting in its pace did not count as activity (the other waits of the gate did),
      so the newcomer, held ~50 ms, read as idle on the node, its neighbour stopped pacing for a
      tick and the turns broke.
    Its turn lines in its first second never say "no turns", in any run; their longest period
    is 160 ms by the median of the runs: 12.000 ms sits on the line, and its own first samples,
    a hair longer on a loaded machine, ask for 320 ms by the rule (one run of three in a CI run,
    its turns unbroken); its first second's share judged by the median too (where its windows
    fall moves it by a few points)."""
    def one(i: int) -> dict[str, float]:
        run, gpu = loop.fresh(f"line{i}"), make_sim_gpu().env
        regions = {name: tmp_path / f"{name}-line{i}.region" for name in ("old", "new")}
        times = tmp_path / f"new-line{i}.times"
        old = run.start(gpu, "kernel", 12000, 4.5, CUDA_DEVICE_SM_LIMIT="70",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["old"]), LAUNCH_LOOP_SYNC="0")
        new = run.start(gpu, "kernel", 12000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions["new"]), LAUNCH_LOOP_SYNC="1",
                        LAUNCH_LOOP_DELAY_US="2000000", LIBCUDA_LOG_LEVEL="4",
                        LAUNCH_LOOP_TIMES=str(times))
        got = run.result(new)
        run.result(old)
        launched = [int(w) for w in times.read_text().split()]
        t0 = launched[1] / 1e9  # its loop's first launch (the first loaded its kernel)
        turns = [x.split(": ", 2)[2] for x in str(got["stderr"]).splitlines()
                 if re.search(r"compute: device \d+: (no turns|turns:)", x)]
        stamped = bench.stamped_since(turns, t0, 1.0)
        first = [x for x in stamped if not x.startswith("-")]
        before = [x for x in stamped if x.startswith("-")][-1:]  # in force at its first launch
        periods = [int(p) for p in re.findall(r"of (\d+) ms", "\n".join(before + first))]
        return {"first_share": float(got["first_share"]),
                "longest_period_ms": max(periods, default=0),
                "broken_turns": float(sum("no turns" in x for x in first))}

    runs = judged_runs(loop, one)
    assert max(r["broken_turns"] for r in runs) == 0, each_run(runs)
    assert medians(runs)["longest_period_ms"] <= 160, each_run(runs)
    assert medians(runs)["first_share"] >= 0.26, each_run(runs)
