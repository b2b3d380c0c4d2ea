"""Compute-limiter benchmark on the simulated GPU (CI machines, no GPU): the same questions as
bench_compute.py, answered with tests/compute/progs/launch_loop.c on libvgpu/build/sim.

    make -C libvgpu && .venv/bin/python tests/benchmarks/bench_compute_sim.py [--only priority]

Prints a markdown report (the `## libvgpu compute` numbers of docs/benchmarks.md).  Sections:
`limits` (one container at 10/30/50/70 %, two at 30 + 70, the no-limit launch cost) and
`priority` (issue 18: a high-priority container beside a low one, flat out and in bursts, its
bursts' start delay, two highs, a low alone), `newcomer` (issue 18: a 30 % container synchronising
after each launch, started beside a 70 % one that was alone and never synchronises) and `cold`
(issue 18: a container paced at 70 % from
its first launch, the share of its first second, for kernels of 2 to 100 ms synchronised after
each launch, every few or never, and a launch-bound model whose kernels load lazily, paced at
30 %), and `alonecost` (a container alone under gpucores 30, launch-bound and GPU-bound, with a
real driver's call costs: what the gate costs it); `--baseline LIB` runs the cold, newcomer,
light and alonecost rows with another libvgpu.so too, in the same run, alternating.
`light` (issue 18: a request service at 30 beside a loop at 70, the H200's `light` shapes, and
one found light while idle that then meets a burst of requests back to back).
`shares` (busy containers whose shares add up to less than, or to, 100: shares as weights under
`default`, caps under `force`; with `--baseline` side by side).
`steal` (issue 18's CPU-starved node: some of the `shares` rows while real-time spinners take
0-3 ms of every 10 ms of each CPU, as a hypervisor's steal does; root).
`--timeslices 0,2000` runs `priority`, `newcomer` and `light` on a simulated GPU of each time
slice (GPUWARDEN_SIM_TIMESLICE, µs; 0: kernels in launch order), side by side, and `--switches
0,50` on one whose every switch between processes costs that much (GPUWARDEN_SIM_SWITCH, µs);
`--sim VAR=VALUE` gives every process of the run a simulated GPU's setting (e.g.
GPUWARDEN_SIM_JITTER=10).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "compute"))

from libvgpu.paths import shim_path, sim_lib_dir  # noqa: E402


def build(tmp: Path, src: Path) -> Path:
    from cprog import compile_c  # tests/: on sys.path below

    return compile_c(src, tmp, extra_flags=["-O2"])


# --sim VAR=VALUE: the simulated GPU's own settings for every process of the run (DVFS, call
# costs, jitter: libvgpu/sim/README.md)
SIM_SETTINGS: dict[str, str] = {}


class Gpu(NamedTuple):
    """A simulated GPU to compare on (`--timeslices`, `--switches`): None = the sim's own."""

    timeslice: int | None = None  # GPUWARDEN_SIM_TIMESLICE, µs (0: launch order)
    switch: int | None = None  # GPUWARDEN_SIM_SWITCH, µs

    @property
    def key(self) -> str:
        return f"{self.timeslice}-{self.switch}"

    @property
    def name(self) -> str:
        ts = self.timeslice
        name = ("this sim" if ts is None else "launch order" if ts == 0
                else f"{ts}-µs slices")
        return name if self.switch is None else f"{name}, {self.switch}-µs switches"


THIS_SIM = Gpu()


def env(tmp: Path, name: str, preload: bool = True, shim: Path | None = None,
        gpu: Gpu = THIS_SIM, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CUDA_", "GPU_CORE", "GPUWARDEN_", "LD_PRELOAD"))}
    e.update(SIM_SETTINGS)
    e.update(LD_LIBRARY_PATH=str(sim_lib_dir()),
             GPUWARDEN_SIM_STATE=str(tmp / f"{name}-{gpu.key}.sim"),
             GPUWARDEN_NODE_REGION=str(tmp / f"{name}-{gpu.key}.node"))
    if gpu.timeslice is not None:
        e["GPUWARDEN_SIM_TIMESLICE"] = str(gpu.timeslice)
    if gpu.switch is not None:
        e["GPUWARDEN_SIM_SWITCH"] = str(gpu.switch)
    if preload:
        e["LD_PRELOAD"] = str(shim or shim_path())
    e.update(extra)
    return e


def loop(exe: Path, e: dict[str, str], grid: int, seconds: float,
         **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(exe), "kernel", str(grid), str(seconds)], env=dict(e, **extra),
                            text=True, stdout=subprocess.PIPE)


def fields(p: subprocess.Popen[str]) -> dict[str, float]:
    out, _ = p.communicate(timeout=120)
    return {k: float(v) for k, v in (w.split("=") for w in out.split())}


def share(p: subprocess.Popen[str]) -> float:
    return fields(p)["share"]


# a high-priority service busy 30 % of the time: a 10-ms kernel, synchronised, idle 23.3 ms
BURSTY = {"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "23300"}
# its bursts' start: a 200-us kernel, synchronised, idle 8 ms, each launch's wait recorded
PROBE = {"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "8000", "LAUNCH_LOOP_LATENCY": "1"}


def pair(tmp: Path, ll: Path, gpu: Gpu, name: str, a: tuple[int, dict[str, str]],
         b: tuple[int, dict[str, str]], seconds: float = 4.0, a_seconds: float | None = None,
         shim: Path | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """Two containers started together on one simulated GPU: (grid, environment) each; the
    first one's loop runs `a_seconds` (default `seconds`)."""
    e = env(tmp, name, gpu=gpu, shim=shim)
    pa = loop(ll, e, a[0], seconds if a_seconds is None else a_seconds,
              CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{name}-{gpu.key}.a"), **a[1])
    pb = loop(ll, e, b[0], seconds,
              CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{name}-{gpu.key}.b"), **b[1])
    return fields(pa), fields(pb)


def priority(tmp: Path, ll: Path, gpu: Gpu) -> dict[str, str]:
    """Issue 18's priority questions on the simulated GPU (`default` policy, 4-s runs measured
    from 1 s on; lows run 1-ms kernels flat out), on `gpu`: row -> cell."""
    def alone(name: str, grid: int, **extra: str) -> dict[str, float]:
        return fields(loop(ll, env(tmp, name, gpu=gpu, **extra), grid, 4.0))

    high = {"CUDA_TASK_PRIORITY": "0", "CUDA_DEVICE_SM_LIMIT": "30"}
    low = {"CUDA_TASK_PRIORITY": "1", "CUDA_DEVICE_SM_LIMIT": "30"}
    flat = alone("p-flat", 1000)["share"]
    low30 = alone("p-low30", 1000, **low)["share"]
    bursty = alone("p-bursty", 10000, **high, **BURSTY)["share"]
    probe = alone("p-probe", 200, **high, **PROBE)
    h1, l1 = pair(tmp, ll, gpu, "p-default", (1000, high), (1000, low))
    h2, l2 = pair(tmp, ll, gpu, "p-bursty2", (10000, dict(high, **BURSTY)), (1000, low))
    h3, l3 = pair(tmp, ll, gpu, "p-probe2", (200, dict(high, **PROBE)), (1000, low))
    h4, h5 = pair(tmp, ll, gpu, "p-highs", (1000, high), (1000, high))

    def pct(x: float, of: float) -> str:
        return f"{100 * x / of:.1f}"

    return {
        "high flat out beside a low: high / low, % of alone":
            f"{pct(h1['share'], flat)} / {pct(l1['share'], flat)}",
        f"high busy ~{100 * bursty:.0f} % in bursts (10-ms kernel, idle 23.3 ms) beside a low: "
        "high / low": f"{pct(h2['share'], bursty)} / **{pct(l2['share'], flat)}**",
        "high 200-µs bursts every 8 ms beside a low: high / low":
            f"{pct(h3['share'], probe['share'])} / {pct(l3['share'], flat)}",
        "two highs flat out": f"{pct(h4['share'], flat)} / {pct(h5['share'], flat)}",
        "low alone at gpucores 30, % of unlimited": pct(low30, flat),
        "high burst start alone, p50 / p99 µs (sim clock)":
            f"{probe['start_p50_us']:.0f} / {probe['start_p99_us']:.0f}",
        "high burst start beside the low, p50 / p99 / max µs":
            f"{h3['start_p50_us']:.0f} / **{h3['start_p99_us']:.0f}** / "
            f"{h3['start_max_us']:.0f} ({h3['starts']:.0f} bursts)",
    }


# the newcomer's kernels (µs): ~H200 4096² matmuls, and 10-ms ones
NEWCOMER = (250, 10_000)


def newcomer_pair(tmp: Path, ll: Path, gpu: Gpu, shim: Path | None, grid: int, key: str,
                  due: float, present: bool, load_grid: int | None = None) -> str:
    """newcomer()'s run of one pair: the first one, then the newcomer, started 2 s later or
    (`present`) with it and idle 2 s after loading a kernel (of `load_grid`, default its loop's),
    as the GPU benchmark's newcomer starts (bench_compute_shapes.py; found light as it idles:
    docs/benchmarks.md, stop 42): its first second and from 1 s on as % of `due`; the first
    one's launched work, % of wall."""
    e = env(tmp, key, shim=shim, gpu=gpu)
    first = loop(ll, e, grid, 7.0, LAUNCH_LOOP_SYNC="0", CUDA_DEVICE_SM_LIMIT="70",
                 CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{key}.a"))
    if not present:
        time.sleep(2.0)  # the first one alone, queueing as deep as the driver lets it
    new = fields(loop(ll, e, grid, 4.0, LAUNCH_LOOP_SYNC="1", CUDA_DEVICE_SM_LIMIT="30",
                      CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{key}.b"),
                      **({"LAUNCH_LOOP_DELAY_US": "2000000"} if present else {}),
                      **({"LAUNCH_LOOP_DELAY_GRID": str(load_grid)} if load_grid else {})))
    return (f"{100 * new['first_share'] / due:.0f} / {100 * new['share'] / due:.0f}; "
            f"{100 * share(first):.1f}")


def newcomer(tmp: Path, ll: Path, gpu: Gpu, shim: Path | None = None) -> dict[str, str]:
    """A 70 % container (`default`) never synchronising, alone for 2 s, then a 30 % one of the
    same kernels synchronising after each launch for 4 s: the newcomer's share of the GPU in its
    first second and from 1 s on, as % of its due (30 % of its own alone share), and the first
    one's launched work over its whole run; the same with the newcomer's process started with
    the first one and idle until its loop, after loading a kernel of its loop's and of another
    (its loop's first kernel then of unknown cost, as on the GPU); on `gpu`, with `shim`
    (default this tree's): row -> cell."""
    cells = {}
    for grid in NEWCOMER:
        name = f"n{grid}-{gpu.key}-{shim is not None}"
        alone = fields(loop(ll, env(tmp, f"{name}-alone", gpu=gpu), grid, 3.0,
                            LAUNCH_LOOP_SYNC="1"))["share"]
        due = 0.3 * alone
        cells[f"newcomer of {grid / 1000:g}-ms kernels: first second / from 1 s on, % of due; "
              "the first one's launched work, % of wall"] = newcomer_pair(
            tmp, ll, gpu, shim, grid, name, due, present=False)
        cells[f"newcomer of {grid / 1000:g}-ms kernels, its process started with the first "
              "one and idle 2 s after loading a kernel: the same"] = newcomer_pair(
            tmp, ll, gpu, shim, grid, f"{name}-idled", due, present=True)
        # as on the GPU: loading ran other kernels (its tensors' fill), so its loop's first
        # kernel is of unknown cost
        cells[f"newcomer of {grid / 1000:g}-ms kernels, idle 2 s after loading a 10-µs kernel: "
              "the same"] = newcomer_pair(tmp, ll, gpu, shim, grid, f"{name}-cold", due,
                                          present=True, load_grid=10)
    return cells


# request services (kernel µs, kernels a request, idle µs after each, µs of requests back to
# back first), beside a 70 % loop of 0.2-ms kernels synchronised every 4: the H200's `light`
# section (bench_compute_shapes.py) with ~4096² and ~1024² matmuls' times; the fifth one idles
# first (found light), then meets a burst, as the GPU benchmark's warm-up is; the last one's
# requests are 24 ms of GPU work (2 x ~16384² matmuls), longer than a light claim's 10 ms
LIGHT = ((200, 8, 20_000, 0), (200, 8, 5_000, 0), (200, 8, 2_500, 0), (13, 1, 2_000, 0),
         (13, 1, 2_000, 300_000), (12_000, 2, 100_000, 0))
LIGHT_IDLE_FIRST_US = 600_000  # a service that meets a burst idles that long first


def light(tmp: Path, ll: Path, gpu: Gpu, shim: Path | None = None) -> dict[str, str]:
    """A request service at gpucores 30 beside a loop at 70, both `default`, 4 s: each as % of
    itself alone (its steady requests), on `gpu`, with `shim` (default this tree's): row ->
    cell."""
    busy = {"LAUNCH_LOOP_SYNC": "4", "CUDA_DEVICE_SM_LIMIT": "70"}
    loop_alone = fields(loop(ll, env(tmp, "l-loop", gpu=gpu, shim=shim), 200, 4.0,
                             **busy))["share"]
    cells = {}
    for grid, n, idle_us, burst_us in LIGHT:
        svc = {"LAUNCH_LOOP_SYNC": str(n), "LAUNCH_LOOP_IDLE_US": str(idle_us),
               "CUDA_DEVICE_SM_LIMIT": "30"}
        name = f"{grid}-{idle_us}-{burst_us}"
        alone = fields(loop(ll, env(tmp, f"l-{name}", gpu=gpu, shim=shim), grid, 4.0, **svc))
        row = f"service of {n} × {grid}-µs kernels, idle {idle_us / 1000:g} ms"
        if burst_us:  # it idles first, then its loop (4 s less that) starts with the burst
            svc |= {"LAUNCH_LOOP_DELAY_US": str(LIGHT_IDLE_FIRST_US),
                    "LAUNCH_LOOP_BURST_US": str(burst_us)}
            row += (f", found light while idle {LIGHT_IDLE_FIRST_US / 1e6:g} s, then "
                    f"{burst_us / 1e6:g} s of requests back to back")
        s, b = pair(tmp, ll, gpu, f"l2-{name}", (grid, svc), (200, busy),
                    a_seconds=4.0 - LIGHT_IDLE_FIRST_US / 1e6 if burst_us else 4.0, shim=shim)
        cells[f"{row}: service / loop, % of alone (the service's busy share alone)"] = (
            f"{100 * s['share'] / alone['share']:.1f} / {100 * b['share'] / loop_alone:.1f} "
            f"({100 * alone['share']:.1f} %)")
    return cells


# containers sharing (3 s): shares as weights under `default`, containers with no gpucores
# (docs/compute.md): name -> each container's launch_loop
class Member(NamedTuple):
    grid: int  # kernel µs
    env: dict[str, str]
    procs: int = 1  # processes of the container
    # environment of its processes after the first, over `env`: (name, value) pairs; GRID_US
    # their kernels' µs
    sibling: tuple[tuple[str, str], ...] = ()

    def process(self, j: int) -> tuple[int, dict[str, str]]:
        """Process `j`'s kernel µs and environment."""
        if j == 0:
            return self.grid, self.env
        extra = dict(self.sibling)
        return int(extra.pop("GRID_US", self.grid)), self.env | extra


def member(grid: int, env: dict[str, str], gpucores: int | None, procs: int,
           sibling: dict[str, str] | None = None) -> Member:
    return Member(grid, env | ({"CUDA_DEVICE_SM_LIMIT": str(gpucores)} if gpucores else {}),
                  procs, tuple((sibling or {}).items()))


def busy(gpucores: int | None = None, procs: int = 1, grid: int = 1000,
         sibling: dict[str, str] | None = None, **extra: str) -> Member:
    """A busy loop of 1-ms kernels (`grid` µs) synchronised every 4; no gpucores when None."""
    return member(grid, {"LAUNCH_LOOP_SYNC": "4", **extra}, gpucores, procs, sibling)


def service(gpucores: int | None = None) -> Member:
    """A request service: 8 × 0.2-ms kernels, then 5 ms idle (~0.235 of the GPU alone)."""
    return member(200, {"LAUNCH_LOOP_SYNC": "8", "LAUNCH_LOOP_IDLE_US": "5000"}, gpucores, 1)


FORCE = {"GPU_CORE_UTILIZATION_POLICY": "force"}
SHARES: dict[str, list[Member]] = {
    "two busy at 30 + 30": [busy(30), busy(30)],
    "two busy at 20 + 50": [busy(20), busy(50)],
    "three busy at 20 + 30 + 30": [busy(20), busy(30), busy(30)],
    "two busy at 30 + 70": [busy(30), busy(70)],
    "`force` 30 + 30": [busy(30, **FORCE), busy(30, **FORCE)],
    "high at 40 under `force` + low at 30": [busy(40, CUDA_TASK_PRIORITY="0", **FORCE),
                                             busy(30)],
    # a container with no gpucores takes what the shares leave (lim_rest_share)
    "30 + one with no gpucores": [busy(30), busy()],
    "30 + two with no gpucores": [busy(30), busy(), busy()],
    "30 + 70 + one with no gpucores": [busy(30), busy(70), busy()],
    "capped 30 (`force`) + one with no gpucores": [busy(30, **FORCE), busy()],
    # ... and light ones (request services) among them
    "service with no gpucores + 30": [service(), busy(30)],
    "service with no gpucores + 30 + one with none": [service(), busy(30), busy()],
    "two services with no gpucores + 30": [service(), service(), busy(30)],
    "service at 30 + 30 + one with no gpucores": [service(30), busy(30), busy()],
    "service at 70 + capped 30 (`force`)": [service(70), busy(30, **FORCE)],
    "30 + 70 + service with no gpucores": [busy(30), busy(70), service()],
    # containers of two processes (shares summed per container)
    "30 + 70 of two processes": [busy(30), busy(70, procs=2)],
    "30 of two processes + 70": [busy(30, procs=2), busy(70)],
    # ... with kernels longer than the GPU's time slice (they split the container's window)
    "3-ms kernels: 30 + 70": [busy(30, grid=3000), busy(70, grid=3000)],
    "3-ms kernels: 30 + 70 of two processes": [busy(30, grid=3000), busy(70, procs=2, grid=3000)],
    "3-ms kernels: 30 of two processes + 70": [busy(30, procs=2, grid=3000), busy(70, grid=3000)],
    "3-ms kernels: 30 + 70 of a process of 3-ms and one of 0.2-ms kernels": [
        busy(30, grid=3000), busy(70, procs=2, grid=3000, sibling={"GRID_US": "200"})],
    "3-ms kernels: 30 + 70 of a busy process and one launching every ~33 ms": [
        busy(30, grid=3000),
        busy(70, procs=2, grid=3000,
             sibling={"LAUNCH_LOOP_SYNC": "1", "LAUNCH_LOOP_IDLE_US": "30000"})],
}


def together(tmp: Path, ll: Path, tag: str, members: list[Member],
             shim: Path | None = None) -> str:
    """`members` started together on one simulated GPU for 3 s: each container's GPU share (its
    processes' summed) and their sum, as a cell."""
    e = env(tmp, tag, shim=shim)
    procs = [[loop(ll, e, grid, 3.0, CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{tag}-{k}"),
                   **penv) for grid, penv in map(m.process, range(m.procs))]
             for k, m in enumerate(members)]
    got = [sum(share(p) for p in container) for container in procs]
    return " + ".join(f"{x:.2f}" for x in got) + f" = {sum(got):.2f}"


def shares(tmp: Path, ll: Path, baseline: Path | None) -> list[str]:
    """Busy containers started together: each one's GPU share and their sum, this tree and
    `baseline` alternated."""
    libs = [("this tree", None)] + ([(f"`{baseline}`", baseline)] if baseline else [])
    cells: dict[str, dict[str, str]] = {}
    for i, (name, members) in enumerate(SHARES.items()):
        for label, lib in libs:
            cells.setdefault(label, {})[name] = together(tmp, ll, f"s{i}-{lib is None}",
                                                         members, lib)
    return side_by_side("containers sharing (loops of 1-ms kernels; services of 8 × 0.2 ms, "
                        "5 ms idle), GPU share each = sum",
                        list(cells.items()))


def steal_cpu(cpu: int, busy_ms: float, period_ms: float) -> None:
    """Take `busy_ms` of every `period_ms` of one CPU from every other program, as a hypervisor
    that steals the vCPU does: a real-time spinner pinned to it, until killed (root)."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    while True:
        t = time.monotonic()
        while time.monotonic() - t < busy_ms / 1000:
            pass
        time.sleep((period_ms - busy_ms) / 1000)


@contextlib.contextmanager
def stolen(busy_ms: float) -> Iterator[None]:
    """`busy_ms` of every 10 ms taken from each CPU this process may use (their periods 3 ms
    apart, so that the CPUs are not taken at once)."""
    spinners = [multiprocessing.Process(target=steal_cpu, args=(cpu, busy_ms, 10 + 3 * i),
                                        daemon=True)
                for i, cpu in enumerate(sorted(os.sched_getaffinity(0)))] if busy_ms else []
    for sp in spinners:
        sp.start()
    try:
        yield
    finally:
        for sp in spinners:
            sp.kill()
            sp.join()


def metered(meter: Path, what: Callable[[], str]) -> str:
    """`what()`'s cell, and how much of its time a sleeping thread woke late."""
    from rounds import stall_metered  # tests/compute: on sys.path (the module's top)

    with stall_metered(meter) as stalled:
        cell = what()
    return f"{cell} (stalled {stalled[0]:.3f})"


STEAL_MS = (0.0, 1.0, 2.0, 3.0)  # of every 10 ms of each CPU
STEAL: dict[str, list[Member]] = {
    "two busy, no gpucores": [busy(), busy()],
    "two busy at 30 + 70": [busy(30), busy(70)],
    "`force` 30 + 30": [busy(30, **FORCE), busy(30, **FORCE)],
    "service with no gpucores + 30": [service(), busy(30)],
    "30 + 70 + service with no gpucores": [busy(30), busy(70), service()],
}


def steal(tmp: Path, ll: Path) -> list[str]:
    """The CPU-starved node: containers sharing while each CPU is taken part of the time."""
    if os.geteuid() != 0:
        raise SystemExit("--only steal: takes CPUs with real-time spinners, which needs root")
    meter = build(tmp, REPO / "tests/compute/progs/stall_meter.c")
    cells: dict[str, dict[str, str]] = {}
    for ms in STEAL_MS:
        label = f"{ms:g} ms of 10 taken" if ms else "quiet"
        with stolen(ms):
            for i, (name, members) in enumerate(STEAL.items()):
                cells.setdefault(label, {})[name] = metered(
                    meter, functools.partial(together, tmp, ll, f"st{i}-{ms:g}", members))
    return side_by_side("containers sharing while each CPU is taken part of every 10 ms (1-ms "
                        "kernels; services of 8 × 0.2 ms, 5 ms idle), GPU share each = sum "
                        "(a sleeping thread's late wake-ups, share of the time)",
                        list(cells.items()))


# launch-bound and GPU-bound loops alone: (kernel µs, their environment)
ALONE = (("1-µs kernels, never synchronised", 1, {"LAUNCH_LOOP_SYNC": "0"}),
         ("1-µs kernels, synchronised every 64", 1, {"LAUNCH_LOOP_SYNC": "64"}),
         ("20-µs kernels, 80 µs of CPU each, synchronised every 16", 20,
          {"LAUNCH_LOOP_SYNC": "16", "LAUNCH_LOOP_GAP_US": "80"}),
         ("5-µs kernels, never synchronised", 5, {"LAUNCH_LOOP_SYNC": "0"}))


def alonecost(tmp: Path, ll: Path, baseline: Path | None) -> list[str]:
    """A container alone under gpucores 30 (`default`: not paced) with a real driver's call
    costs (`GPUWARDEN_SIM_CALL_NS`, 2.9 µs a launch): its launch rate as % of the same loop with
    no libvgpu, medians of three alternated rounds, this tree and `baseline`."""
    libs = [("this tree", None)] + ([(f"`{baseline}`", baseline)] if baseline else [])
    rates: dict[tuple[str, str], list[float]] = {}
    for rnd in range(3):
        for label, grid, extra in ALONE:
            for i, (which, lib, preload) in enumerate([("plain", None, False)] + [
                    (name, lib, True) for name, lib in libs]):
                e = env(tmp, f"a{rnd}-{grid}-{i}-{len(rates)}", preload=preload, shim=lib,
                        GPUWARDEN_SIM_CALL_NS="2900,1100,150")
                if preload:
                    e["CUDA_DEVICE_SM_LIMIT"] = "30"
                rates.setdefault((label, which), []).append(
                    fields(loop(ll, e, grid, 2.0, **extra))["rate"])
    lines = ["| alone at gpucores 30 (`default`), % of the rate with no libvgpu | "
             + " | ".join(name for name, _ in libs) + " |", "| --- | " + "--- | " * len(libs)]
    for label, _, _ in ALONE:
        plain = statistics.median(rates[(label, "plain")])
        lines.append(f"| {label} | " + " | ".join(
            f"{100 * statistics.median(rates[(label, name)]) / plain:.1f}" for name, _ in libs)
            + " |")
    return lines


def side_by_side(title: str, runs: list[tuple[str, dict[str, str]]]) -> list[str]:
    """One table: a row per question, a column per simulated GPU."""
    lines = [f"| {title} | " + " | ".join(name for name, _ in runs) + " |",
             "| --- | " + "--- | " * len(runs)]
    for row in runs[0][1]:
        lines.append(f"| {row} | " + " | ".join(cells.get(row, "") for _, cells in runs) + " |")
    return lines


# (kernel µs, synchronise every N launches, 0 = never): the cold-start rows
COLD = ((100_000, 1), (100_000, 4), (20_000, 8), (100_000, 0), (2_000, 0))


def cold(tmp: Path, ll: Path, baseline: Path | None) -> list[str]:
    """A container paced at 70 % (`force`) from its very first launch: the share of its first
    second (launch_loop's first_share) and from 1 s on, with this tree's libvgpu and, given,
    another build of it, alternating row by row."""
    libs = [("this tree", None)] + ([(f"`{baseline}`", baseline)] if baseline else [])
    head = " | ".join(f"{name}: first second / from 1 s on / wall s" for name, _ in libs)
    lines = [f"| 70 % from the first launch (simulated GPU) | {head} |",
             "| --- | " + "--- | " * len(libs)]
    for kernel_us, sync in COLD:
        cells = []
        for i, (_, lib) in enumerate(libs):
            t = time.monotonic()
            f = fields(loop(ll, env(tmp, f"c{kernel_us}-{sync}-{i}", shim=lib,
                                    CUDA_DEVICE_SM_LIMIT="70",
                                    GPU_CORE_UTILIZATION_POLICY="force"),
                            kernel_us, 2.5, LAUNCH_LOOP_SYNC=str(sync)))
            # 2.5 s of launching and the end's synchronisation: much longer = work queued unpaced
            cells.append(f"{f['first_share']:.2f} / {f['share']:.2f} / "
                         f"{time.monotonic() - t:.1f}")
        what = "never synchronised" if sync == 0 else (
            "synchronised after each launch" if sync == 1 else f"synchronised every {sync}")
        lines.append(f"| {kernel_us / 1000:g}-ms kernels, {what} | " + " | ".join(cells) + " |")
    # a launch-bound model paced at 30 % (a limit it never reaches) from its first launch, each
    # of its 16 kernels loaded lazily by its first launch (3-12 ms in the call): its first
    # second's speed, as % of the same loop's alone
    model = dict(LAUNCH_LOOP_KERNELS="16", LAUNCH_LOOP_SYNC="16", LAUNCH_LOOP_GAP_US="80",
                 GPUWARDEN_SIM_LAZY_LOAD_US="3000")
    alone = fields(loop(ll, env(tmp, "lazy-alone", **model), 20, 2.5))
    cells = []
    for i, (_, lib) in enumerate(libs):
        f = fields(loop(ll, env(tmp, f"lazy-{i}", shim=lib, CUDA_DEVICE_SM_LIMIT="30",
                                GPU_CORE_UTILIZATION_POLICY="force", **model), 20, 2.5))
        cells.append(f"{100 * f['first_share'] / alone['first_share']:.0f} / "
                     f"{100 * f['share'] / alone['share']:.0f}")
    lines += ["", "| 30 % from the first launch, a model of 16 kernels loaded lazily | "
              + " | ".join(f"{name}: % of alone, first second / from 1 s on" for name, _ in libs)
              + " |", "| --- | " + "--- | " * len(libs),
              f"| 20-µs kernels, 80 µs of CPU each, synchronised every 16 (alone: "
              f"{100 * alone['first_share']:.0f} % of the GPU) | " + " | ".join(cells) + " |"]
    return lines


def command(argv: list[str] | None) -> str:
    """The command line this run was started with, as the report shows it."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join([".venv/bin/python tests/benchmarks/bench_compute_sim.py", *args])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sections = ("limits", "priority", "newcomer", "light", "shares", "alonecost", "cold",
                "steal")
    ap.add_argument("--only", default=",".join(sections),
                    help=f"comma list of: {', '.join(sections)}")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another libvgpu.so to run the cold, newcomer, light, shares and "
                    "alonecost rows with, side by side")
    ap.add_argument("--timeslices", default=None, metavar="US,...",
                    help="run priority and newcomer on a simulated GPU of each time slice "
                    "(µs; 0: kernels in launch order), side by side (default: the sim's own)")
    ap.add_argument("--switches", default=None, metavar="US,...",
                    help="run priority, newcomer and light on a simulated GPU whose every "
                    "switch between processes costs each of these (µs), side by side")
    ap.add_argument("--sim", action="append", default=[], metavar="GPUWARDEN_SIM_VAR=VALUE",
                    help="a setting of the simulated GPU for every process of the run (e.g. "
                    "GPUWARDEN_SIM_JITTER=10, GPUWARDEN_SIM_DVFS=1980,1600,300,0.6); repeatable")
    args = ap.parse_args(argv)
    for kv in args.sim:
        var, eq, value = kv.partition("=")
        if not eq or not var.startswith("GPUWARDEN_SIM_") or var == "GPUWARDEN_SIM_STATE":
            ap.error(f"--sim {kv!r}: give GPUWARDEN_SIM_<VAR>=VALUE, one of the simulated GPU's "
                     "settings in libvgpu/sim/README.md (the state file is the benchmark's own)")
        SIM_SETTINGS[var] = value
    from libvgpu.sim import SimInputError, parse_timeslice

    try:
        slices: list[int | None] = [None] if args.timeslices is None else [
            parse_timeslice(v, name="--timeslices") for v in args.timeslices.split(",")]
    except SimInputError as err:
        ap.error(str(err))
    switches: list[int | None] = [None]
    if args.switches is not None:
        try:
            switches = [int(v) for v in args.switches.split(",")]
        except ValueError:
            switches = [-1]
        if any(v is not None and not 0 <= v <= 100_000 for v in switches):
            ap.error(f"--switches {args.switches!r}: give microseconds, integers from 0 to "
                     "100000, comma-separated")
    gpus = [Gpu(ts, sw) for ts in slices for sw in switches]
    only = set(args.only.split(","))
    if only - set(sections):
        ap.error(f"--only: unknown {sorted(only - set(sections))} (valid: {', '.join(sections)})")
    if args.baseline is not None and not args.baseline.is_file():
        ap.error(f"--baseline: {args.baseline} is not a file (give a built libvgpu.so)")
    t0 = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ll = build(tmp, REPO / "tests/compute/progs/launch_loop.c")
        prio: list[str] = []
        libs: list[tuple[str, Path | None]] = [("", None)] + (
            [(f", `{args.baseline}`", args.baseline)] if args.baseline else [])
        if "priority" in only:
            prio += side_by_side("priority (gpucores 30 each, `default`)", [
                (g.name, priority(tmp, ll, g)) for g in gpus])
        if "newcomer" in only:
            prio += [""] * bool(prio) + side_by_side("newcomer (30 % beside a 70 % one)", [
                (g.name + label, newcomer(tmp, ll, g, lib)) for g in gpus for label, lib in libs])
        if "light" in only:
            prio += [""] * bool(prio) + side_by_side(
                "request service (30) beside a loop (70), `default`", [
                    (g.name + label, light(tmp, ll, g, lib)) for g in gpus
                    for label, lib in libs])
        if "shares" in only:
            prio += [""] * bool(prio) + shares(tmp, ll, args.baseline)
        if "alonecost" in only:
            prio += [""] * bool(prio) + alonecost(tmp, ll, args.baseline)
        if "cold" in only:
            prio += [""] * bool(prio) + cold(tmp, ll, args.baseline)
        if "steal" in only:
            prio += [""] * bool(prio) + steal(tmp, ll)
        if "limits" not in only:
            print(f"Machine: {platform.node()} ({os.cpu_count()} cores), simulated GPU  ")
            print(f"Command: `{command(argv)}`  ")
            print(f"Total time: {time.monotonic() - t0:.0f} s\n")
            print("\n".join(prio))
            return 0
        bl = build(tmp, Path(__file__).with_name("bench_compute_launch.c"))
        for grid, label in ((2000, "2 ms kernels"), (100, "100 µs kernels")):
            base = share(loop(ll, env(tmp, f"u{grid}"), grid, 4.0))
            for lim in (10, 30, 50, 70):
                s = share(loop(ll, env(tmp, f"l{grid}-{lim}", CUDA_DEVICE_SM_LIMIT=str(lim),
                                       GPU_CORE_UTILIZATION_POLICY="force"), grid, 4.0))
                rows.append((label, base, lim, s))
        shared = env(tmp, "shared")
        a = loop(ll, dict(shared, CUDA_DEVICE_SM_LIMIT="30",
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "a.region")), 1000, 4.0)
        b = loop(ll, dict(shared, CUDA_DEVICE_SM_LIMIT="70",
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "b.region")), 1000, 4.0)
        sa, sb = share(a), share(b)
        alone = share(loop(ll, env(tmp, "alone"), 1000, 4.0))
        plain, shim = [], []
        for i in range(5):
            for preload, acc in ((False, plain), (True, shim)):
                e = env(tmp, f"o{i}{preload}", preload, GPUWARDEN_SIM_KERNEL_SCALE="0.001")
                out = subprocess.run([str(bl), "200", "500"], env=e, capture_output=True,
                                     text=True, check=True).stdout
                acc.append(float(out.split()[0].split("=")[1]))
    print(f"Machine: {platform.node()} ({os.cpu_count()} cores), simulated GPU  ")
    print(f"Command: `{command(argv)}`  ")
    print(f"Total time: {time.monotonic() - t0:.0f} s\n")
    print("| workload | unlimited share | limit % | achieved share % | within ±5 |")
    print("| --- | --- | --- | --- | --- |")
    for label, base, lim, s in rows:
        print(f"| {label} | {100 * base:.1f} | {lim} | {100 * s:.1f} | {abs(100 * s - lim) <= 5} |")
    print(f"\nTwo low-priority containers sharing (1 ms kernels): limit 30 got {100 * sa:.1f} %, "
          f"limit 70 got {100 * sb:.1f} % (alone, unlimited: {100 * alone:.1f} %).  ")
    p, s = statistics.median(plain), statistics.median(shim)
    print(f"No-limit launch cost (sim cuLaunchKernel, 5 alternated runs, median of medians): "
          f"{p:.0f} ns plain, {s:.0f} ns with libvgpu, +{s - p:.0f} ns.")
    if prio:
        print("\n" + "\n".join(prio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
