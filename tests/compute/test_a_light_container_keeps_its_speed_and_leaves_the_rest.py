"""Under `default`, what a paced container leaves unused goes to the others (issue 18), and a
workload that alone uses less than its share is not slowed by it.  A request service at 30 %
that uses ~10 % is *light* (limiter.h, lim_light): it leaves the turns and claims the GPU while
it has work, as a high-priority container does, and its neighbours take the rest.  Before, the
service waited for its turn's window on every request (0.05 of the GPU for 0.099 alone) and its
70 % neighbour stayed at 0.70 while a fifth of the GPU sat idle.

The pure parts through the C driver: the use average and the light rule with its hysteresis;
the scenario on the simulated GPU, judged by the medians of three runs (rounds.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest
from rounds import compute_state, each_run, judged_runs, medians
from testbed import wait_for

MS = 1_000_000
TICK_NS = 10 * MS
SETTLED = 300_000_000  # LIM_LIGHT_SETTLE_NS
PACE, RUN = 1, 2  # enum lim_hold: held back by its pace, for a claim that ran on


def test_use_follows_the_charged_share_an_eighth_a_tick(limiter_driver) -> None:
    # 3 ms charged per 10-ms tick from 0: 30 % approached an eighth of the way each tick
    got = limiter_driver.run("use", 0, *[3 * TICK_NS // 10, TICK_NS] * 3).split()
    assert got == ["375", "703", "990"]
    # an empty tick leaves it; more charged than wall time counts as the whole GPU
    assert limiter_driver.run("use", 1234, 5, 0).split() == ["1234"]
    assert limiter_driver.run("use", 0, 2 * TICK_NS, TICK_NS).split() == ["1250"]
    # a paced container starts at the whole GPU and falls under 15 % within ~15 idle ticks
    idle = limiter_driver.run("use", 10000, *[0, TICK_NS] * 16).split()
    assert int(idle[12]) > 1500 > int(idle[15])


@pytest.mark.parametrize(
    ("was", "use_x100", "idle_x100", "limit", "want"),
    [
        # under 90 % of its share and idle at least half the time: light; no longer from 125 % of
        # its share (its own pace keeps it under its share: a backstop) or under 30 % idle; in
        # between it stays as it was
        (0, 2699, 5000, 30, 1), (0, 2700, 9000, 30, 0), (1, 2700, 9000, 30, 1),
        (1, 3749, 3000, 30, 1), (1, 3750, 9000, 30, 0), (1, 1000, 2999, 30, 0),
        # a busy member held back (between its windows of long turns, behind a neighbour's
        # queue) uses little but is hardly ever idle: not light
        (0, 0, 4999, 30, 0), (0, 0, 0, 30, 0),
        (0, 0, 10000, 70, 1), (0, 6299, 5000, 70, 1), (0, 6300, 9000, 70, 0),
        # not paced, or paced to the whole GPU: never light
        (0, 0, 10000, 0, 0), (1, 0, 10000, 0, 0), (0, 0, 10000, 100, 0),
    ],
)
def test_light_below_half_its_share_while_mostly_idle(limiter_driver, was: int, use_x100: int,
                                                      idle_x100: int, limit: int,
                                                      want: int) -> None:
    assert int(limiter_driver.run("light", was, use_x100, idle_x100, 0, limit, SETTLED)) == want
    # the averages of a container's first 0.3 s paced never make it light
    assert int(limiter_driver.run("light", was, use_x100, idle_x100, 0, limit, SETTLED - 1)) == 0


@pytest.mark.parametrize(("waited_x100", "longest_ns", "want"),
                         [(4999, 12 * MS, 0), (5000, 12 * MS, 1), (9000, 12 * MS, 1),
                          (5000, MS, 1),
                          # short kernels keep claiming, which serves them better than turns
                          # they cannot fill
                          (9000, MS - 1, 0), (9000, 200_000, 0)])
def test_a_light_one_with_long_kernels_held_back_by_its_own_pace_half_the_time_is_held_back(
        limiter_driver, waited_x100: int, longest_ns: int, want: int) -> None:
    assert int(limiter_driver.run("heldback", waited_x100, longest_ns, 0)) == want * PACE


@pytest.mark.parametrize(("run_ns", "charged_ns", "want"),
                         [(0, 0, 0), (10 * MS - 1, 0, 0), (10 * MS, 0, RUN),
                          (50 * TICK_NS, 0, RUN),
                          # a launch-bound loop's claim keeps the GPU busy a fraction of it
                          (10 * MS, 2_400_000, RUN), (30 * MS, 22 * MS, RUN)])
def test_a_light_one_that_claims_without_a_break_and_leaves_the_gpu_idle_is_held_back(
        limiter_driver, run_ns: int, charged_ns: int, want: int) -> None:
    # a launch-bound loop's claim never ends: whatever its kernels and waits, it is held back
    assert int(limiter_driver.run("heldback", 0, 200_000, run_ns, charged_ns)) == want


@pytest.mark.parametrize(("run_ns", "charged_ns", "want"),
                         [(10 * MS, int(7.5 * MS), 0), (25 * MS, 24 * MS, 0),
                          (49 * MS, 49 * MS, 0), (30 * MS, 60 * MS, 0),
                          # a busy claim runs LIM_LIGHT_BURST_NS at most: a loop flat out that
                          # was light while it idled, resuming, is held back then
                          (50 * MS, 50 * MS, RUN), (80 * MS, 200 * MS, RUN)])
def test_a_light_one_whose_claim_keeps_the_gpu_busy_runs_a_request_s_length(
        limiter_driver, run_ns: int, charged_ns: int, want: int) -> None:
    # a request of a few long kernels (2 x 12 ms) claims without a break, its GPU busy all along,
    # 100 ms after the last one's end
    assert int(limiter_driver.run("heldback", 0, 12 * MS, run_ns, charged_ns, 100 * MS)) == want


@pytest.mark.parametrize(("gap_ns", "want"), [(0, 0), (250 * MS - 1, 0), (250 * MS, RUN),
                                              (1500 * MS, RUN)])
def test_a_busy_claim_after_a_long_pause_is_a_loop_starting_not_a_request(
        limiter_driver, gap_ns: int, want: int) -> None:
    # light because it idled (a model loaded and waiting), its loop starting flat out: the 10-ms
    # bound, however busy its claim
    assert int(limiter_driver.run("heldback", 0, 12 * MS, 20 * MS, 20 * MS, gap_ns)) == want


@pytest.mark.parametrize(("gap_ms", "limit", "want_ms"), [(100, 30, 166), (249, 50, 100),
                                                         (250, 30, 0), (13_000, 30, 0)])
def test_a_request_may_spend_fifty_ms_of_gpu_time_at_once_and_a_loop_starting_none(
        limiter_driver, gap_ms: int, limit: int, want_ms: int) -> None:
    # a claim begun after a pause shorter than 250 ms is a request: its pace lets 50 ms of GPU
    # time go at once (166 ms of pace at 30 %); after a longer one, the shared pace's own
    ms = 1_000_000
    assert int(limiter_driver.run("lighttol", gap_ms * ms, limit)) // ms == want_ms


def test_each_hold_for_a_claim_that_ran_on_lasts_twice_the_last_until_it_stays_light_a_second(
        limiter_driver) -> None:
    # a launch-bound loop is light ~20 ms each time: 0.3, 0.6, 1.2, then 2.4 s out of light; a
    # service light a second since its last burst starts again from 0.3 s
    ms = 1_000_000
    got = [int(x) for x in limiter_driver.run("backoff", *[20 * ms] * 5, 1000 * ms,
                                              999 * ms).split()]
    assert got == [300 * ms, 600 * ms, 1200 * ms, 2400 * ms, 2400 * ms, 300 * ms, 600 * ms]


@pytest.mark.parametrize(("was", "held", "want"), [(1, 0, 1), (1, 1, 0),
                                                   # held back only ends a light spell: a member
                                                   # of the turns waits for its windows, a
                                                   # service among them too, and is found light
                                                   (0, 1, 1), (0, 0, 1)])
def test_a_light_one_held_back_is_light_no_more(limiter_driver, was: int, held: int,
                                                 want: int) -> None:
    # used 10 % of a 30 % share, idle 60 % of its free time: light but for being held back
    assert int(limiter_driver.run("light", was, 1000, 6000, held, 30, SETTLED)) == want


def test_the_waited_share_follows_a_quarter_a_tick(limiter_driver) -> None:
    # 6 ms of each 10-ms tick waited, from 0: past half in the 7th tick (~70 ms)
    got = [int(x) for x in limiter_driver.run("waited", 0, *[6 * TICK_NS // 10, TICK_NS] * 7)
           .split()]
    assert got[0] == 1500 and got[5] < 5000 <= got[6]


def test_idle_is_the_part_of_the_free_time_the_charges_do_not_fill(limiter_driver) -> None:
    ms, us = 1_000_000, 1_000
    # from no history (busy): an idle 10-ms tick is an eighth of the 80-ms span; a tick waited
    # through leaves it; a tick half waited, 1 ms charged, adds 4 idle ms of 5
    got = limiter_driver.run("idle", 0, 0, 0, 0, 10 * ms, 0, 10 * ms, 10 * ms,
                             1 * ms, 5 * ms, 10 * ms).split()
    assert got == ["1250", "1250", "1671"]
    # launched in a sliver at the end of a waited tick, work counts against the free time of
    # the next tick, in which it runs: as if launched and run in one tick, busy
    half = (80 * ms, 40 * ms)  # 50 % idle
    apart = limiter_driver.run("idle", *half, 3 * ms, 10 * ms - 20 * us, 10 * ms,
                               0, 7 * ms, 10 * ms).split()
    together = limiter_driver.run("idle", *half, 3 * ms, 7 * ms - 20 * us, 10 * ms).split()
    assert abs(int(apart[-1]) - int(together[-1])) <= 20 and int(together[-1]) < 4850, (
        apart, together)


def test_a_service_launching_at_its_window_s_start_reads_its_idle_time(limiter_driver) -> None:
    # a service over its share in the turns (sim trace, 10-ms ticks, 40-ms period): its window
    # opens 0.2 ms before a tick (1.6 ms launched), it runs and launches twice more in the next,
    # sleeps, then waits: 4.8 ms charged of 13.1 free, 63 % idle.  Averaged per tick, the
    # window's tick went an eighth towards busy and it read 44 %, under the 50 that makes it
    # light: it stayed in the turns at 32 % of its alone speed in 2 runs of 12
    ms = 1_000_000
    cycle = [int(1.6 * ms), int(9.8 * ms), 10 * ms, int(3.2 * ms), 0, 10 * ms,
             0, int(7.1 * ms), 10 * ms, 0, 10 * ms, 10 * ms]
    got = [int(x) for x in limiter_driver.run("idle", 0, 0, *cycle * 30).split()]
    assert min(got[-8:]) >= 6000, got[-8:]


def test_a_tick_waited_but_for_a_sliver_hardly_moves_the_idle_share(limiter_driver) -> None:
    # a busy member of the turns waits for its window all but a few µs of a tick: those µs are
    # all idle, but they are no eighth of its time (one run in seven found it light)
    ms, us = 1_000_000, 1_000
    busy = [9 * ms, 0, 10 * ms] * 60  # 10 % idle
    got = [int(x) for x in
           limiter_driver.run("idle", 0, 0, *busy, 0, 10 * ms - 2 * us, 10 * ms).split()]
    assert abs(got[-2] - 1000) <= 2 and abs(got[-1] - got[-2]) <= 2, got[-2:]
    # twenty ticks with 50 µs free each: 1 ms idle in all, a tenth of one idle tick
    slivers = limiter_driver.run("idle", 0, 0, *busy, *[0, 10 * ms - 50 * us, 10 * ms] * 20)
    assert 1050 < int(slivers.split()[-1]) < 1150, slivers.split()[-1]
    # and a busy member (its window's work fills its free time) reads busy however it waits
    member = [3 * ms, 7 * ms, 10 * ms] + [0, 10 * ms - 2 * us, 10 * ms] * 3
    assert int(limiter_driver.run("idle", 0, 0, *member * 30).split()[-1]) < 100


class Request(NamedTuple):
    """A service's request: `kernels` of `grid` µs, then `idle_us` idle."""
    idle_us: int
    grid: int = 1000
    kernels: int = 1

    def env(self) -> dict[str, str]:
        return {"LAUNCH_LOOP_SYNC": str(self.kernels), "LAUNCH_LOOP_IDLE_US": str(self.idle_us)}


def service_beside_a_loop(loop, gpu_env: dict[str, str], tmp: Path,
                          req: Request) -> dict[str, float]:
    """One run: a 30 % service of `req`s beside a 70 % loop of 1-ms kernels; both `default`,
    4 s."""
    service = loop.start(gpu_env, "kernel", req.grid, 4.0, CUDA_DEVICE_SM_LIMIT="30", **req.env(),
                         LIBCUDA_LOG_LEVEL="3",
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "service.region"))
    busy = loop.start(gpu_env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="70",
                      LIBCUDA_LOG_LEVEL="3",
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "busy.region"))
    states = {}

    def service_light() -> bool:  # as the region shows it (`gpuwarden` and the agent read it)
        states.update(service=compute_state(tmp / "service.region"),
                      busy=compute_state(tmp / "busy.region"))
        return states["service"].light and not states["busy"].light

    wait_for(service_light, 3, "the service found light", detail=lambda: f"{states}")
    rs, rb = loop.result(service), loop.result(busy)
    assert "light (claims the GPU while busy" in str(rs["stderr"]), rs["stderr"]
    # the loop waits for the service's claims and its work runs behind the service's: never
    # light itself (two light ones would not wait for each other)
    assert "light (claims the GPU" not in str(rb["stderr"]), rb["stderr"]
    return {"service": float(rs["share"]), "busy": float(rb["share"])}


def service_runs(loop, make_sim_gpu, tmp_path: Path, req: Request) -> tuple[dict, dict]:
    """judged_runs of the service alone and beside the loop: the medians, and each run's values
    for the failure message."""
    def one(i: int) -> dict[str, float]:
        d = tmp_path / str(i)
        d.mkdir()
        run = loop.fresh(str(i))
        alone = float(run.run(make_sim_gpu().env, "kernel", req.grid, 2.0,
                              CUDA_DEVICE_SM_LIMIT="30", **req.env(),
                              CUDA_DEVICE_MEMORY_SHARED_CACHE=str(d / "alone.region"))["share"])
        return {"alone": alone, **service_beside_a_loop(run, make_sim_gpu().env, d, req)}

    runs = judged_runs(loop, one)
    print(each_run(runs))
    return medians(runs), each_run(runs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("req", "keeps", "busy_gets"),
    [
        # a request every ~10 ms: ~0.099 alone.  It keeps at least 85 % of that (0.5 when it
        # took turns; each request waits behind the loop's short queue, or the rest of its time
        # slice), and the loop gets most of what it leaves (0.70 when it took turns; 0.84 while
        # each claim was padded by a 1-ms low queue, 0.875-0.88 at 0.4 ms)
        (Request(9000), 0.85, 0.855),
        # a request every ~4 ms: ~0.24 alone, 80 % of its 30 % share.  Light only under half its
        # share, it was in and out of the turns and got 0.12 (waiting for its window on many
        # requests); light up to 90 % of its share: ~0.18 (~0.20 with the 0.4-ms pad), and the
        # loop keeps its 70 (0.68 with the 1-ms pad, 0.73 with 0.4)
        (Request(3000), 0.68, 0.70),
        # requests of 24 ms of GPU work (2 x 12-ms kernels), one every ~124 ms: ~0.19 alone.
        # Held back for a claim that ran on at its first request, and its pace's 20-ms burst
        # (6 ms of GPU time at 30 %) under a request, it took turns and waited for its window
        # on each one until stop 49 (bench_compute_sim.py --only light: 64.6 % of alone, the
        # loop beside it 76.3 % of its own); since, a claim that keeps the GPU busy runs 50 ms
        # and a light one's pace lets that much go at once (99.9 and 81.2)
        (Request(100_000, grid=12_000, kernels=2), 0.9, 0.72),
    ],
    ids=["a tenth of the GPU", "most of its share", "requests of 24 ms"],
)
def test_a_light_service_keeps_its_speed_and_its_neighbour_takes_the_rest(
        loop, make_sim_gpu, tmp_path: Path, req: Request, keeps: float, busy_gets: float) -> None:
    m, detail = service_runs(loop, make_sim_gpu, tmp_path, req)
    assert m["service"] >= keeps * m["alone"], detail
    assert m["busy"] >= busy_gets, detail
    assert m["service"] + m["busy"] <= 1.02, detail


def together(run, gpu: dict[str, str], regions: Path, *members: tuple[int, dict[str, str]],
             ) -> list[float]:
    """Containers (kernel µs, environment) started together for 3 s, their regions in the new
    folder `regions`: their GPU shares."""
    regions.mkdir()
    procs = [run.start(gpu, "kernel", grid, 3.0, **env,
                       CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions / str(i)))
             for i, (grid, env) in enumerate(members)]
    return [float(run.result(p)["share"]) for p in procs]


SERVICE = {"LAUNCH_LOOP_SYNC": "8", "LAUNCH_LOOP_IDLE_US": "5000"}  # ~0.235 of the GPU alone
BUSY = {"LAUNCH_LOOP_SYNC": "4"}


def service_alone(run, gpu: dict[str, str], region: Path) -> float:
    return float(run.run(gpu, "kernel", 200, 2.0, **SERVICE,
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region))["share"])


def over_rounds(loop, make_sim_gpu, one) -> tuple[dict[str, float], dict[str, list[float]]]:
    """`one(run, gpu, i)`'s measures over judged_runs, each with a node region and simulated GPU
    of its own: their medians, and each run's for the failure message."""
    runs = judged_runs(loop, lambda i: one(loop.fresh(str(i)), make_sim_gpu().env, i))
    return medians(runs), each_run(runs)


@pytest.mark.slow
def test_a_service_with_no_gpucores_is_light_beside_a_paced_loop(loop, make_sim_gpu,
                                                                  tmp_path: Path) -> None:
    # a request service with no gpucores beside a busy 30 % loop takes turns by what the loop's
    # share leaves (70, lim_rest_share), uses a fraction of it and is found light; light, it keeps
    # that share while the loop waits for its claims.  It lost it at once (the yielding loop is
    # no paced member): light and unpaced in turn every tick, it got 0.18 of the GPU for 0.23
    # alone, and before it took turns at all the loop was held to its 30 (0.30) beside it
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        alone = service_alone(run, gpu, tmp_path / f"alone-{i}")
        service = run.start(gpu, "kernel", 200, 3.0, **SERVICE, LIBCUDA_LOG_LEVEL="3",
                            CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"service-{i}"))
        busy = run.start(gpu, "kernel", 200, 3.0, **BUSY, CUDA_DEVICE_SM_LIMIT="30",
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"busy-{i}"))
        rs, rb = run.result(service), run.result(busy)
        assert "(share 70 %: what the others' leave)" in str(rs["stderr"]), rs["stderr"]
        assert "light (claims the GPU while busy" in str(rs["stderr"]), rs["stderr"]
        return {"alone": alone, "service": float(rs["share"]), "busy": float(rb["share"])}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["service"] >= 0.9 * m["alone"], detail
    assert m["busy"] >= 0.6, detail


@pytest.mark.slow
def test_a_light_service_beside_a_capped_loop_waits_for_no_window(loop, make_sim_gpu,
                                                                   tmp_path: Path) -> None:
    # the capped (`force`) loop does not wait for a light one's claims and counts it out of its
    # turns; the service took turns by its own window all the same and waited for it on its
    # requests: 0.16 of the GPU for 0.235 alone (0.8 s of 3 waited in the gate)
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        alone = service_alone(run, gpu, tmp_path / f"a{i}")
        service, capped = together(
            run, gpu, tmp_path / str(i), (200, dict(SERVICE, CUDA_DEVICE_SM_LIMIT="70")),
            (1000, dict(BUSY, CUDA_DEVICE_SM_LIMIT="30", GPU_CORE_UTILIZATION_POLICY="force")))
        return {"alone": alone, "service": service, "capped": capped}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["service"] >= 0.85 * m["alone"], detail
    assert m["capped"] == pytest.approx(0.30, abs=0.03), detail


@pytest.mark.slow
def test_a_light_service_with_no_gpucores_takes_its_part_of_the_rest(loop, make_sim_gpu,
                                                                      tmp_path: Path) -> None:
    # a light service with no gpucores, a loop at 30 and a loop with none: the one without
    # counted the light service out and took all that the 30 leaves (70) as its share, so the
    # 30 one got 30 % of what the service left, 0.19-0.22, where it is guaranteed 0.30.  The
    # light one now counts among those that split the rest (vgpu_node_lights)
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        service, loop30, other = together(run, gpu, tmp_path / str(i), (200, SERVICE),
                                          (1000, dict(BUSY, CUDA_DEVICE_SM_LIMIT="30")),
                                          (1000, BUSY))
        return {"service": service, "30": loop30, "none": other}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["30"] >= 0.27, detail
    assert m["service"] >= 0.15 and m["none"] >= 0.3, detail


@pytest.mark.slow
def test_busy_members_of_the_turns_are_never_found_light(loop, make_sim_gpu,
                                                         tmp_path: Path) -> None:
    # two busy loops at 30 + 70 use their shares and wait in the gate for the rest: never idle.
    # A wait step reached the idle average only at its end, so a tick that ended inside one read
    # as idle for the rest of it: the 30 one read 55 % idle at 6-24 % used, was found light in
    # one run of six, and the two launched over each other's windows
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        procs = {limit: run.start(gpu, "kernel", 500, 3.0, CUDA_DEVICE_SM_LIMIT=str(limit),
                                  LIBCUDA_LOG_LEVEL="3",
                                  CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{limit}-{i}"))
                 for limit in (30, 70)}
        shares = {}
        for limit, p in procs.items():
            got = run.result(p)
            assert "light (claims the GPU" not in str(got["stderr"]), (limit, got["stderr"])
            shares[str(limit)] = float(got["share"])
        return shares

    m, detail = over_rounds(loop, make_sim_gpu, one)
    for limit in (30, 70):
        assert m[str(limit)] == pytest.approx(limit / 100, abs=0.05), detail


@pytest.mark.slow
def test_a_service_over_its_share_is_found_light_however_it_starts(loop, make_sim_gpu,
                                                                   tmp_path: Path) -> None:
    # 8 × 0.2-ms kernels a request, then 2.5 ms idle (~0.37 of the GPU alone), at 30 beside a
    # 70 % loop of 0.2-ms kernels: its own pace holds it to ~0.29.  Started in the turns, its
    # window's launches came at the end of waited ticks, each read as an eighth towards busy:
    # 44 % idle where 63 % of its free time was, never light, 0.12 in 2 runs of 12
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        service = run.start(gpu, "kernel", 200, 3.0, CUDA_DEVICE_SM_LIMIT="30",
                            LAUNCH_LOOP_SYNC="8", LAUNCH_LOOP_IDLE_US="2500",
                            LIBCUDA_LOG_LEVEL="3",
                            CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"service-{i}"))
        busy = run.start(gpu, "kernel", 200, 3.0, CUDA_DEVICE_SM_LIMIT="70",
                         LAUNCH_LOOP_SYNC="4",
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"busy-{i}"))
        rs, rb = run.result(service), run.result(busy)
        assert "light (claims the GPU while busy" in str(rs["stderr"]), (i, rs["stderr"])
        return {"service": float(rs["share"]), "busy": float(rb["share"])}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert min(detail["service"]) >= 0.25, detail  # in every run: the fault was 2 runs of 12
    assert m["busy"] >= 0.55, detail


def two_process_service(run, gpu_env: dict[str, str], region: Path, **extra: str) -> list:
    """The two processes of one 30 % service container: one 1-ms kernel per request, then
    19 ms idle, each (~0.1 of the GPU together)."""
    return [run.start(gpu_env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="30",
                      LAUNCH_LOOP_SYNC="1", LAUNCH_LOOP_IDLE_US="19000",
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region), **extra) for _ in range(2)]


@pytest.mark.slow
def test_a_service_of_two_processes_is_light_as_one_container(loop, make_sim_gpu,
                                                              tmp_path: Path) -> None:
    # its use and its waits are the container's, summed over its processes (each process's
    # ticker reads the sums; a wait in progress is seen only by its own process's ticker)
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        alone = [run.result(p) for p in two_process_service(run, make_sim_gpu().env,
                                                            tmp_path / f"alone-{i}")]
        service = two_process_service(run, gpu, tmp_path / f"service-{i}", LIBCUDA_LOG_LEVEL="3")
        busy = run.start(gpu, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="70",
                         LIBCUDA_LOG_LEVEL="3",
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"busy-{i}"))
        got = [run.result(p) for p in service]
        rb = run.result(busy)
        for r in got:
            assert "light (claims the GPU while busy" in str(r["stderr"]), r["stderr"]
        assert "light (claims the GPU" not in str(rb["stderr"]), rb["stderr"]
        return {"alone": sum(float(r["share"]) for r in alone),
                "service": sum(float(r["share"]) for r in got), "busy": float(rb["share"])}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    print(detail)
    assert m["service"] >= 0.85 * m["alone"], detail
    assert m["busy"] >= 0.78, detail
    assert m["service"] + m["busy"] <= 1.02, detail


@pytest.mark.slow
def test_paced_members_keep_their_turns_while_a_light_one_claims(loop, make_sim_gpu,
                                                                 tmp_path: Path) -> None:
    # loops at 30 and 50 take turns beside a light service at 20 (8 × 0.2-ms kernels a request,
    # then 15 ms idle: ~0.1 of the GPU) and wait for its claims launch by launch.  Their ticker
    # also took a busy light neighbour as a reason to yield: a tick that fell in one of the
    # service's claims (its request and 0.4 ms) took the loop out of the turns for 10 ms and
    # the other one's windows with it (0.910-0.957 of the GPU used; beside the tiny share a
    # service with no gpucores gets beside 30 + 70, 0.921-0.973: the 70 one at 0.61-0.64)
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        regions = tmp_path / str(i)
        regions.mkdir()
        loops = [run.start(gpu, "kernel", 1000, 3.0, **BUSY, CUDA_DEVICE_SM_LIMIT=str(pct),
                           LIBCUDA_LOG_LEVEL="3", CUDA_DEVICE_MEMORY_SHARED_CACHE=str(
                               regions / f"loop-{pct}")) for pct in (30, 50)]
        service = run.start(gpu, "kernel", 200, 3.0, LAUNCH_LOOP_SYNC="8",
                            LAUNCH_LOOP_IDLE_US="15000", CUDA_DEVICE_SM_LIMIT="20",
                            LIBCUDA_LOG_LEVEL="3",
                            CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions / "service"))
        r30, r50 = (run.result(p) for p in loops)
        rs = run.result(service)
        assert "light (claims the GPU while busy" in str(rs["stderr"]), rs["stderr"]
        yields = sum(str(r["stderr"]).count(", yielding") for r in (r30, r50))
        shares = [float(r["share"]) for r in (r30, r50, rs)]
        return {"yields": yields, "30": shares[0], "50": shares[1], "service": shares[2],
                "sum": sum(shares)}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["yields"] == 0, detail  # 69-107 a run before
    assert m["sum"] >= 0.95, detail  # 0.964-0.970 (0.910-0.955 before)
    # what the light service leaves goes to the loops by their weights (0.34 + 0.57 of ~0.91)
    assert m["50"] / m["30"] == pytest.approx(50 / 30, rel=0.12), detail


def held_back_beside_a_loop(run, gpu: dict[str, str], regions: Path, grid: int, seconds: float,
                            busy_seconds: float, **env: str) -> tuple[dict, dict]:
    """A 30 % container of `grid`-µs kernels (`env`, for `seconds`) found light and held back for a
    claim that ran on, beside a 70 % loop of 200-µs kernels synchronised every 4 (for
    `busy_seconds`), their regions in the new folder `regions`: both results."""
    regions.mkdir()
    small = run.start(gpu, "kernel", grid, seconds, **env, CUDA_DEVICE_SM_LIMIT="30",
                      LIBCUDA_LOG_LEVEL="3", CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions / "small"))
    busy = run.start(gpu, "kernel", 200, busy_seconds, CUDA_DEVICE_SM_LIMIT="70",
                     LAUNCH_LOOP_SYNC="4", CUDA_DEVICE_MEMORY_SHARED_CACHE=str(regions / "busy"))
    rs, rb = run.result(small), run.result(busy)
    log = str(rs["stderr"])
    assert "light (claims the GPU while busy" in log, log
    # held back for its claim: it ran 10 ms or more, its GPU busy a fraction of it
    assert re.search(r"claimed [1-9]\d+ ms without a break \(\d+ ms of GPU time\): no longer light",
                     log), log
    return rs, rb


@pytest.mark.slow
def test_a_launch_bound_loop_found_light_never_starves_its_neighbour(loop, make_sim_gpu,
                                                                     tmp_path: Path) -> None:
    # a 30 % loop of 5-us kernels synchronised every 4 keeps the GPU busy ~20 % of the time, so
    # it is found light; its claim then never breaks, and its 70 % neighbour, waiting for it,
    # got 0.002 of the GPU (H100: a 4096² loop beside 1024² matmuls, 0.0 % of its alone
    # throughput).  Held back once its claim runs 10 ms, it takes turns: 0.61-0.62, what this
    # loop gets beside any 30 here (beside it capped with `force`, which never claims, or beside
    # 1-ms kernels: the gaps of its own synchronisations in its window)
    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        rs, rb = held_back_beside_a_loop(run, gpu, tmp_path / str(i), 5, 3.0, 3.0,
                                         LAUNCH_LOOP_SYNC="4")
        return {"small": float(rs["share"]), "busy": float(rb["share"])}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["busy"] >= 0.55, detail
    assert m["small"] >= 0.04, detail  # about its share of the time: 0.055-0.064 of ~0.20 alone


@pytest.mark.slow
def test_a_light_service_held_back_by_a_burst_is_light_again_soon(loop, make_sim_gpu,
                                                                  tmp_path: Path) -> None:
    # a service of one 13-µs kernel a request every ~2 ms, found light while it waited for work,
    # meets 0.3 s of requests back to back: launch-bound, its claim runs 10 ms and it is held
    # back, as a launch-bound loop is.  Its burst over, it is a light service again; held out of
    # light for 2.3 s it waited for its window on every request (H100, 1024² matmuls beside a
    # 70 % loop after the benchmark's 0.5-s warm-up flat out: 39 % of its alone speed, p99 28 ms;
    # there the hold is inferred, here it is logged and the service read 0.003 for 0.006 alone)
    service_env = {"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "2000"}

    def one(run, gpu: dict[str, str], i: int) -> dict[str, float]:
        alone = float(run.run(gpu, "kernel", 13, 2.0, **service_env, CUDA_DEVICE_SM_LIMIT="30",
                              CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"alone-{i}"))
                      ["share"])
        # (the burst holds it back; the loop runs on through its 0.6-s wait for work)
        rs, rb = held_back_beside_a_loop(run, gpu, tmp_path / str(i), 13, 3.0, 3.6, **service_env,
                                         LAUNCH_LOOP_DELAY_US="600000",
                                         LAUNCH_LOOP_BURST_US="300000")
        return {"alone": alone, "service": float(rs["share"]), "busy": float(rb["share"])}

    m, detail = over_rounds(loop, make_sim_gpu, one)
    assert m["service"] >= 0.85 * m["alone"], detail  # its seconds 1-3, after the burst
    assert m["busy"] >= 0.6, detail
