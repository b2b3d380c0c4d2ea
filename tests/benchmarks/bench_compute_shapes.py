"""Compute isolation across workload shapes (issue 18), on a real GPU; judged by GPU-time share.

    make -C libvgpu && python3 tests/benchmarks/bench_compute_shapes.py --out /tmp/shapes

Writes <out>/bench_compute_shapes.json and .md.  For each shape (a bf16 matmul loop of one size,
eager or as CUDA graphs, on 1 or several streams, in 1 or several processes of one container,
synchronising after every launch, every few, or only at the end of a phase; or a transformer
encoder run forward at batch 1 or 8), one libvgpu'd run goes through the phases unlimited, then
10/30/50/70 % (GPU_CORE_UTILIZATION_POLICY=force, set at run time through the container region),
then unlimited again.  The share of a phase is its throughput over the *saturated* throughput of
the same kernel, measured in the same invocation without libvgpu (CUDA graphs of that matmul
replayed back to back on the same number of streams); for the encoder, whose kernels are many,
it is NVML's GPU busy share.  A phase is within target when its share is within 5 points of the
limit, or, where the shape alone (unlimited) uses less than the limit, when its throughput is at
least 95 % of the unlimited one (read in an interleaved run, against that run's control phases).

Sections: `shapes` (the sweep), `cold` (containers paced from their first launch: the share of
the first second, the second one and seconds 2-4, each on its own, against a fresh unlimited
container), `shared` (two containers 30 + 70 under `default`, then the 30 one idles and resumes),
`priority` (a high-priority container beside a low one), `trace` (one container's first
seconds at each limit in 0.5-s slices: busy share, charge, cost scale, waits), `probe` (event and
graph timings of each matmul size without libvgpu).  Workers are this file (`worker`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from bench_compute import Gpu, _gpu_name, container_env  # noqa: E402

if TYPE_CHECKING:
    from libvgpu.region import Region

LIMITS = (10, 30, 50, 70)
SECTIONS = ("probe", "shapes", "cold", "trace", "shared", "weights", "sharedcold", "newcomer",
            "priority", "gatewait", "light")


@dataclass(frozen=True)
class Shape:
    """One workload shape.  kind 'mm': a bf16 matmul of `size`²; `sync` launches between
    synchronisations (0: only at the end of a phase); `graph` matmuls per CUDA graph (0 eager);
    `streams` streams launched round robin; `procs` processes in the container.  kind 'model':
    an 8-layer transformer encoder (d_model 1024) forward at batch `size`, sequence `seq`."""

    kind: str
    size: int
    sync: int = 1
    graph: int = 0
    streams: int = 1
    procs: int = 1
    seq: int = 0
    duty: float = 1.0  # < 1: after each synchronisation, idle so that work takes this share
    idle_ms: float = 0.0  # > 0: after each synchronisation, idle this long (a request service)

    @property
    def name(self) -> str:
        if self.kind == "model":
            return f"encoder b{self.size} s{self.seq}"
        parts = [f"{self.size}²", f"graph×{self.graph}" if self.graph else "eager"]
        parts.append({0: "no sync", 1: "sync each"}.get(self.sync, f"sync/{self.sync}"))
        if self.streams > 1:
            parts.append(f"{self.streams} streams")
        if self.procs > 1:
            parts.append(f"{self.procs} procs")
        if self.idle_ms:
            parts.append(f"idle {self.idle_ms:g} ms")
        return " ".join(parts)

    def ref_key(self) -> tuple[int, int]:
        return (self.size, self.streams)


SHAPES = (
    # kernel sizes (H200 bf16: 256² ~5 µs, 1024² ~13 µs, 2048² ~30 µs, 4096² ~200 µs,
    # 8192² ~1.5 ms, 16384² ~12 ms, 32768² ~100 ms)
    Shape("mm", 256, sync=1),
    Shape("mm", 256, sync=16),
    Shape("mm", 1024, sync=1),
    Shape("mm", 1024, sync=4),
    Shape("mm", 1024, sync=0),
    Shape("mm", 1024, sync=64, graph=20),
    Shape("mm", 1024, sync=4, streams=4),
    Shape("mm", 1024, sync=4, procs=2),
    Shape("mm", 2048, sync=1),
    Shape("mm", 2048, sync=64),
    Shape("mm", 4096, sync=4),
    Shape("mm", 4096, sync=0, graph=4),
    Shape("mm", 8192, sync=1),
    Shape("mm", 16384, sync=1),
    Shape("mm", 32768, sync=1),
    Shape("model", 1, seq=64),
    Shape("model", 8, seq=512),
)


# ---- worker -----------------------------------------------------------------------------------


def build(shape: Shape):
    """Returns (step, steps per call): one call of step() launches that many matmuls/forwards."""
    import torch

    if shape.kind == "model":
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, 8, enable_nested_tensor=False)
        model = model.to("cuda", torch.bfloat16).eval()
        x = torch.randn(shape.size, shape.seq, 1024, device="cuda", dtype=torch.bfloat16)

        def fwd() -> None:
            with torch.no_grad():
                model(x)

        return fwd, 1
    n = shape.size
    streams = [torch.cuda.Stream() for _ in range(shape.streams)]
    mats = [
        (
            torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
            torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
            torch.empty(n, n, device="cuda", dtype=torch.bfloat16),
        )
        for _ in streams
    ]
    torch.cuda.synchronize()
    if shape.graph:
        graphs = []
        for s, (a, b, c) in zip(streams, mats, strict=True):
            with torch.cuda.stream(s):
                for _ in range(3):
                    torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for _ in range(shape.graph):
                    torch.matmul(a, b, out=c)
            graphs.append((s, g))
        torch.cuda.synchronize()

        def replay() -> None:
            for s, g in graphs:
                with torch.cuda.stream(s):
                    g.replay()

        return replay, shape.graph * len(graphs)

    def eager() -> None:
        for s, (a, b, c) in zip(streams, mats, strict=True):
            with torch.cuda.stream(s):
                torch.matmul(a, b, out=c)

    return eager, len(streams)


def parse_phases(spec: str) -> list[tuple[int, float, float | None]]:
    """A worker's --phases, LIMIT:SECONDS[:WARM],...: (limit, seconds, warm-up or None) each.
    LIMIT -2..99 (-1 as is, -2 idle, 0 unlimited), SECONDS above 0, WARM 0 or more; a
    ValueError names the phase and what is valid."""
    out = []
    for phase in spec.split(","):
        parts = phase.split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            limit, dur = int(parts[0]), float(parts[1])
            warm = float(parts[2]) if len(parts) == 3 else None
            if not -2 <= limit <= 99 or dur <= 0 or (warm is not None and warm < 0):
                raise ValueError
        except ValueError:
            raise ValueError(f"--phases {spec!r}: phase {phase!r} is not LIMIT:SECONDS[:WARM] "
                             "(LIMIT -2..99: -1 as is, -2 idle, 0 unlimited; SECONDS above 0; "
                             "WARM 0 or more)") from None
        out.append((limit, dur, warm))
    return out


def worker(args: argparse.Namespace, phases: list[tuple[int, float, float | None]]) -> int:
    import torch

    shape = Shape(**json.loads(args.shape))
    step, per_call = build(shape)
    for _ in range(0 if args.cold else 5):  # cold: the phases start with the first steps
        step()
    torch.cuda.synchronize()
    region = None
    if "CUDA_DEVICE_MEMORY_SHARED_CACHE" in os.environ and "LD_PRELOAD" in os.environ:
        from libvgpu.region import Region

        region = Region.open(os.environ["CUDA_DEVICE_MEMORY_SHARED_CACHE"])
    states: list[State] = []
    stop_states = sample_states(region, states) if args.states and region is not None else None
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    sync_every = shape.sync or (1 if shape.duty < 1.0 or shape.idle_ms else 0)
    t_next = time.monotonic()
    for limit, dur, phase_warm in phases:
        warm = args.warm if phase_warm is None else phase_warm
        if limit >= 0 and region is not None:
            region.set_compute_limit(0, limit)
        t0 = t_next
        t_next = t0 + dur
        if limit == -2:  # idle phase
            time.sleep(max(0.0, t_next - time.monotonic()))
            print(json.dumps({"limit": limit, "t1": t0, "t2": t_next, "steps_per_s": 0.0}))
            continue
        n = 0
        while not args.cold and time.monotonic() < t0 + warm:
            step()
            n += 1
            if sync_every and n % sync_every == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        t1, calls, lat, windows = time.monotonic(), 0, [], []
        # a warm-up held up past the phase's end leaves nothing measured: said, not read as a
        # rate over an empty window with nothing charged or waited in it
        overran = round(t1 - t_next, 3) if t1 >= t_next else None
        tb_burst = t1
        s1 = region.compute_state(0) if region is not None else None
        while True:
            tb = time.monotonic()
            if tb >= t_next:
                break
            step()
            calls += 1
            if sync_every and calls % sync_every == 0:
                tl = time.monotonic() if args.timeline else 0.0
                torch.cuda.synchronize()
                if args.timeline:
                    windows.append((round(tl, 6), round(time.monotonic(), 6)))
                if sync_every == 1 or shape.idle_ms:  # a step's, or a request's time
                    lat.append(time.monotonic() - (tb if sync_every == 1 else tb_burst))
                if shape.duty < 1.0:
                    busy = time.monotonic() - tb_burst
                    time.sleep(busy * (1 - shape.duty) / shape.duty)
                if shape.idle_ms:
                    time.sleep(shape.idle_ms / 1e3)
                tb_burst = time.monotonic()
        torch.cuda.synchronize()
        t2 = time.monotonic()
        rec = {
            "limit": limit,
            "t1": t1,
            "t2": t2,
            "steps_per_s": calls * per_call / (t2 - t1),
            "step_p50_ms": round(1e3 * statistics.median(lat), 3) if lat else None,
            "step_p99_ms": round(1e3 * sorted(lat)[len(lat) * 99 // 100], 3) if lat else None,
            "steps": len(lat),
        }
        if overran is not None:
            rec["warm_overran_s"] = overran
        if args.timeline:
            rec["windows"] = windows
        if states:
            rec["states"] = [x for x in list(states) if t0 - STATE_EVERY_S <= x.t <= t2]
        if s1 is not None and region is not None:
            s2 = region.compute_state(0)
            launches = s2.launches - s1.launches
            rec |= {
                "charged_pct": 100 * (s2.charged_ns - s1.charged_ns) / 1e9 / (t2 - t1),
                "waited_pct": 100 * (s2.waited_ns - s1.waited_ns) / 1e9 / (t2 - t1),
                "gated_launches": launches,
                "est_us_per_launch": (s2.charged_ns - s1.charged_ns) / 1e3 / launches
                if launches
                else 0.0,
                "cost_scale": s2.cost_scale,
            }
        print(json.dumps(rec), flush=True)
    if stop_states is not None:
        stop_states()
    if region is not None:
        region.close()
    return 0


STATE_EVERY_S = 0.01  # a worker's --states: its container's compute state this often


class State(NamedTuple):
    """One sample of a container's compute state on device 0 (sample_states); a list of the
    same fields once it went through a worker's JSON record."""
    t: float  # time.monotonic()
    charged_ns: int
    waited_ns: int
    launches: int
    turns: int  # 1: taking turns
    cost_scale: float
    effective_pct: int


def sample_states(region: Region, out: list[State]) -> Callable[[], None]:
    """Appends a State of the container's device 0 to `out` every STATE_EVERY_S, from a thread,
    until the returned function is called (before the region is closed): what its gate did over
    time (timeline_slices())."""
    import threading

    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            st = region.compute_state(0)
            out.append(State(round(time.monotonic(), 6), st.charged_ns, st.waited_ns,
                             st.launches, int(st.turns), round(st.cost_scale, 4),
                             st.effective_pct))
            stop.wait(STATE_EVERY_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def done() -> None:
        stop.set()
        thread.join()

    return done


# ---- probe: what the GPU and its events say about each matmul size, without libvgpu ---------


def probe(args: argparse.Namespace) -> int:
    import torch

    out = {}
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty_like(a)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        reps = max(2, min(200, int(2e5 / (n / 256) ** 3)))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                torch.matmul(a, b, out=c)
        g.replay()
        torch.cuda.synchronize()
        t0, k = time.monotonic(), 0
        while time.monotonic() < t0 + 1.0:
            g.replay()
            k += 1
        torch.cuda.synchronize()
        sat_us = 1e6 * (time.monotonic() - t0) / (k * reps)
        iso, chained = [], []
        e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        for _ in range(50):
            torch.cuda.synchronize()
            e[0].record()
            torch.matmul(a, b, out=c)
            e[1].record()
            torch.cuda.synchronize()
            iso.append(1e3 * e[0].elapsed_time(e[1]))
        evs = [torch.cuda.Event(enable_timing=True) for _ in range(101)]
        for _ in range(20):  # queue ahead so the stream is busy
            torch.matmul(a, b, out=c)
        evs[0].record()
        for i in range(100):
            torch.matmul(a, b, out=c)
            evs[i + 1].record()
        torch.cuda.synchronize()
        chained = [1e3 * evs[i].elapsed_time(evs[i + 1]) for i in range(100)]
        out[n] = {
            "graph_us_per_matmul": round(sat_us, 2),
            "isolated_event_us_min": round(min(iso), 2),
            "isolated_event_us_p50": round(statistics.median(iso), 2),
            "chained_event_us_min": round(min(chained), 2),
            "chained_event_us_p50": round(statistics.median(chained), 2),
        }
        print(json.dumps({"size": n, **out[n]}), flush=True)
        del a, b, c, g
        torch.cuda.empty_cache()
    return 0


# ---- driver -----------------------------------------------------------------------------------


LIGHT_VERDICTS_KEPT = 12  # the run's first light verdicts (the shim's log), in each phase's record
STAMPED_LOG_KEPT = 200  # the first turn and pace lines (stamped: stamped_since reads them by time)
STAMP = re.compile(r" \[monotonic (\d+\.\d+) s\]$")


def stamped_since(lines: list[str], t0: float, until_s: float) -> list[str]:
    """The log lines stamped (the shim's " [monotonic T s]", the clock time.monotonic reads) no
    later than `until_s` after `t0`, each with its time since `t0` in front of it instead:
    "+0.123 s: turns: ...".  Unstamped lines (an older library) are kept as they are."""
    out = []
    for line in lines:
        m = STAMP.search(line)
        if m is None:
            out.append(line)
            continue
        since = float(m.group(1)) - t0
        if since <= until_s:
            out.append(f"{since:+.3f} s: {line[:m.start()]}")
    return out


class Runner:
    def __init__(self, tmp: Path, gpu: Gpu, phase_s: float, warm_s: float,
                 shim: Path | None = None, load: CpuLoad | None = None) -> None:
        from libvgpu.paths import shim_path

        self.tmp, self.gpu, self.phase_s, self.warm_s = tmp, gpu, phase_s, warm_s
        self.shim = str(shim or shim_path())
        self.count = 0
        self.workers = 0
        self.load = load

    def container(self, **extra: str) -> dict[str, str]:
        self.count += 1
        return container_env(self.shim, self.tmp, self.count, **extra)

    def start(self, shape: Shape, phases: str, env: dict[str, str], start_at: float,
              cold: bool = False, warm_s: float | None = None, timeline: bool = False,
              states: bool = False):
        warm = self.warm_s if warm_s is None else warm_s
        cmd = [sys.executable, __file__, "worker", "--shape", json.dumps(asdict(shape)),
               f"--phases={phases}", "--start-at", str(start_at), "--warm", str(warm)]
        cmd += ["--cold"] if cold else []
        cmd += ["--timeline"] if timeline else []
        cmd += ["--states"] if states else []
        procs = []
        for _ in range(shape.procs):
            # both to files: a shim logging at LIBCUDA_LOG_LEVEL=3, or a phase's record with
            # its step windows, may write more than a pipe holds before results() reads it (a
            # newcomer's print blocked until the first container ended, and its last phase was
            # left empty)
            self.workers += 1
            out = open(self.tmp / f"worker-{self.workers}.out", "w+")  # noqa: SIM115
            err = open(self.tmp / f"worker-{self.workers}.err", "w+")  # noqa: SIM115
            p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
            p.out_file, p.err_file = out, err  # type: ignore[attr-defined]
            procs.append(p)
        return procs

    def results(self, procs: list) -> list[dict]:
        """Per phase, the processes' throughputs summed and the NVML window of the phase; with
        timelines (`start(timeline=True)`), each process's step windows in `windows`, one list
        per process."""
        per = []
        light = 0  # times the shim logged the container found light (LIBCUDA_LOG_LEVEL=3)
        verdicts: list[str] = []  # the shim's light verdicts over the run, in order
        turns: list[str] = []  # its turn windows as they changed (LIBCUDA_LOG_LEVEL=4), in order
        claims: list[str] = []  # its light claims as they began (LIBCUDA_LOG_LEVEL=4), in order
        feedback: list[str] = []  # its busy feedback's windows (LIBCUDA_LOG_LEVEL=4), in order
        paces: list[str] = []  # its pacing decisions as they changed (LIBCUDA_LOG_LEVEL=3)
        for p in procs:
            p.wait(timeout=300)
            p.out_file.seek(0)
            out = p.out_file.read()
            p.out_file.close()
            p.err_file.seek(0)
            err = p.err_file.read()
            p.err_file.close()
            if p.returncode != 0:
                raise SystemExit(f"worker failed (rc {p.returncode}):\n{err[-4000:]}")
            per.append([json.loads(x) for x in out.splitlines() if x.startswith("{")])
            light += err.count("light (claims the GPU while busy")
            verdicts += [x.split("compute: ", 1)[1] for x in err.splitlines()
                         if "compute: used" in x]
            turns += [x.split(": ", 2)[2] for x in err.splitlines()
                      if "compute: device" in x and "turns" in x]
            claims += [x.split("compute: ", 1)[1] for x in err.splitlines()
                       if "compute: a light claim" in x]
            feedback += [x.split(": ", 2)[2] for x in err.splitlines()
                         if "compute: device" in x and "busy feedback" in x]
            paces += [x.split(": ", 2)[2] for x in err.splitlines()
                      if "compute: device" in x and "others active" in x]
        res = []
        for phases in zip(*per, strict=True):
            r = dict(phases[0])
            if "windows" in r:
                r["windows"] = [x["windows"] for x in phases]
            r["found_light"] = light
            r["light_verdicts"] = verdicts[:LIGHT_VERDICTS_KEPT]
            r["turn_log"] = turns[:STAMPED_LOG_KEPT]
            r["pace_log"] = paces[:STAMPED_LOG_KEPT]
            r["claim_log"] = claims[:LIGHT_VERDICTS_KEPT]
            r["feedback_log"] = feedback[:LIGHT_VERDICTS_KEPT]
            r["steps_per_s"] = sum(x["steps_per_s"] for x in phases)
            r["t1"] = max(x["t1"] for x in phases)
            r["t2"] = min(x["t2"] for x in phases)
            r.update(self.gpu.window(r["t1"], r["t2"]))
            res.append(r)
        return res

    def run(self, shape: Shape, phases: str, env: dict[str, str],
            warm_s: float | None = None) -> list[dict]:
        start = time.monotonic() + 15.0
        return self.results(self.start(shape, phases, env, start if shape.procs > 1 else 0.0,
                                       warm_s=warm_s))


def saturated(r: Runner, size: int, streams: int) -> float:
    """matmuls/s of `size`² back to back as CUDA graphs on `streams` streams, no libvgpu, with
    any CPU load (--cpu-load) paused: starved of a CPU, the replay loop itself reads low (H200,
    16 spinners: a 4096² loop paced at 70 read 77-83 % of a reference taken under the load,
    at the same steps/s as on a calm CPU, 72 %)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    graph = max(2, min(64, int(64 * (1024 / size) ** 2)))
    # synchronised every few replays: replays queue asynchronously, and a phase's end must not
    # wait for seconds of queued work
    shape = Shape("mm", size, sync=1 if size >= 8192 else 4, graph=graph, streams=streams)
    ph = r.phase_s * (3 if size >= 16384 else 1)
    with r.load.paused() if r.load is not None else contextlib.nullcontext():
        return r.results(r.start(shape, f"0:{ph}", env, 0.0))[0]["steps_per_s"]


def judge(limit: int, share: float | None, alone_share: float | None, rate: float,
          alone_rate: float) -> bool | None:
    if share is None or alone_share is None:
        return None
    if launch_bound(limit, alone_share):
        return rate >= 0.95 * alone_rate
    return abs(share - limit) <= 5


def busy_verdict(limit: int, alone_share: float | None, alone_busy: float | None,
                 busy: float | None) -> bool | None:
    """The limit is on GPU time.  A shape whose kernels keep the GPU busy longer than their
    saturated throughput says (eager launches' own time on the GPU) may be launch-bound by its
    throughput share and still use the limit's GPU time alone: there it is held to the limit in
    GPU time (NVML busy within 5 points), and judged so; None elsewhere, where the throughput
    share is the GPU-time share and NVML's busy reading (which reads 4096² to 32768² matmuls
    paced at 50 % as 31-44 % busy on an H100 for 46-49 % of their throughput) judges nothing."""
    if (alone_share is None or alone_busy is None or busy is None
            or not launch_bound(limit, alone_share) or alone_busy < limit):
        return None
    return abs(busy - limit) <= 5


def launch_bound(limit: int, alone_share: float) -> bool:
    """The shape alone uses less than the limit: judged by its speed, not by its share (issue
    18's rule as written; a shape alone at 27 % under a limit of 30 must keep 95 % of its speed,
    not merely read 25 %)."""
    return alone_share < limit


AB_PHASE_S, AB_ROUNDS = 0.3, 8
NULL = -1  # the interleaved run's control: a phase left as is (unlimited) between unlimited ones


def interleaved(r: Runner, shape: Shape, limits: list[int]) -> dict[int, dict]:
    """Each limit against unlimited in alternating AB_PHASE_S phases, AB_ROUNDS rounds, in one
    process: the host's speed drifts by up to ±40 % over seconds (launch-bound shapes' unlimited
    phases of 1.5 s), which alternation this fine averages out.  Per limit: the median over its
    phases of the phase's throughput as % of the unlimited phases on either side of it (one H200
    run: the batch-1 encoder's phases read 58-137 % of the mean of all unlimited phases, so a
    mean over six of them moved by ±8 points from run to run), and the share of its time it
    waited in the gate.  Each round also has a control phase (NULL: left unlimited), read the
    same way: what the comparison itself gives with no limit at all (H200: 97.6-106.8 % in
    medians of 12 rounds), the reference the limited phases are judged against."""
    # the first two phases warm the process and the gate up (its first paced launches measure
    # every kernel, the clock thread starts NVML): the cold section measures that start, and
    # left in it fell on the first limit's first round alone (one run: 85.9 % at the first
    # limit, 102 at the others, none of them waiting)
    seq = [NULL, *limits]
    phases = ",".join([f"0:0.5,{limits[0]}:0.5"] + [f"{lim}:{AB_PHASE_S},0:{AB_PHASE_S}"
                                                    for _ in range(AB_ROUNDS) for lim in seq])
    res = r.run(shape, phases, r.container(GPU_CORE_UTILIZATION_POLICY="force"),
                warm_s=0.05)[2:]
    return {lim: paired(res, lim) for lim in seq}


def paired(res: list[dict], lim: int) -> dict:
    """`lim`'s phases of an interleaved run, each as % of its unlimited neighbours' mean."""
    rounds, waited = [], []
    for i, p in enumerate(res):
        if p["limit"] != lim:
            continue
        nb = [res[j]["steps_per_s"] for j in (i - 1, i + 1)
              if 0 <= j < len(res) and res[j]["limit"] == 0]
        if nb:
            rounds.append(100 * p["steps_per_s"] / statistics.mean(nb))
            waited.append(p.get("waited_pct", 0.0))
    return {"pct_of_alone": round(statistics.median(rounds), 1),
            "waited_pct": round(statistics.mean(waited), 2),
            "rounds_pct": [round(x, 1) for x in rounds]}


def bench_shapes(r: Runner, shapes: tuple[Shape, ...], limits: tuple[int, ...] = LIMITS,
                 out: list[dict] | None = None) -> list[dict]:
    """Each shape's row, appended to `out` as it is done (a run cut short keeps them)."""
    refs: dict[tuple[int, int], float] = {}
    out = [] if out is None else out
    for shape in shapes:
        ref = None
        if shape.kind == "mm":
            if shape.ref_key() not in refs:
                refs[shape.ref_key()] = saturated(r, shape.size, shape.streams)
            ref = refs[shape.ref_key()]
        ph = r.phase_s * (3 if shape.kind == "mm" and shape.size >= 16384 else 1)
        # unlimited phases between the limited ones: a host's speed drifts within a run (the
        # last unlimited phase ran up to 30 % faster than the first), so each limited phase is
        # compared with the unlimited phases on either side of it
        phases = ",".join([f"0:{ph}"] + [f"{lim}:{ph},0:{ph}" for lim in limits])
        res = r.run(shape, phases, r.container(GPU_CORE_UTILIZATION_POLICY="force"))

        def share(p: dict, ref: float | None = ref) -> float | None:
            if ref:
                return 100 * p["steps_per_s"] / ref
            return p.get("gpu_busy_pct")

        alone = res[0::2]
        alone_rate = max(p["steps_per_s"] for p in alone)
        shares = [share(p) for p in alone]
        alone_share = None if None in shares else max(s for s in shares if s is not None)
        points = []
        for i in range(1, len(res), 2):
            p, nb = res[i], (res[i - 1], res[i + 1])
            s = share(p)
            nb_rate = statistics.mean(x["steps_per_s"] for x in nb)
            nb_shares = [share(x) for x in nb]
            nb_share = None if None in nb_shares else statistics.mean(
                x for x in nb_shares if x is not None)
            points.append({
                "limit": p["limit"],
                "share_pct": None if s is None else round(s, 1),
                "pct_of_alone": round(100 * p["steps_per_s"] / nb_rate, 1),
                "alone_share_pct": None if nb_share is None else round(nb_share, 1),
                "ok": judge(p["limit"], s, nb_share, p["steps_per_s"], nb_rate),
                **{k: (round(v, 2) if isinstance(v, float) else v) for k, v in p.items()
                   if k not in ("t1", "t2", "limit")},
            })
        # launch-bound points: judged again by an interleaved comparison, which the host's
        # drift between 1.5-s phases does not swamp
        bound = [p["limit"] for p in points if p["alone_share_pct"] is not None
                 and launch_bound(p["limit"], p["alone_share_pct"])]
        if bound:
            ab = interleaved(r, shape, bound)
            for p in points:
                if p["limit"] in ab:
                    p["ab"] = ab[p["limit"]] | {"null_pct": ab[NULL]["pct_of_alone"]}
                    p["ok"] = judge(p["limit"], p["share_pct"], p["alone_share_pct"],
                                    p["ab"]["pct_of_alone"], p["ab"]["null_pct"])
        busy = [p.get("gpu_busy_pct") for p in alone]
        alone_busy = statistics.mean(busy) if busy and None not in busy else None
        for p in points:
            p["busy_ok"] = busy_verdict(p["limit"], alone_share, alone_busy,
                                        p.get("gpu_busy_pct"))
        row = {"shape": shape.name, "spec": asdict(shape), "saturated_steps_per_s": ref,
               "share_basis": "throughput / saturated" if ref else "NVML GPU busy",
               "alone_busy_pct": None if alone_busy is None else round(alone_busy, 1),
               "alone_steps_per_s": round(alone_rate, 1),
               "alone_share_pct": None if alone_share is None else round(alone_share, 1),
               "alone": [{k: v for k, v in p.items() if k not in ("t1", "t2")} for p in alone],
               "points": points}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


NVML_PERIOD_S = 0.2  # the H200's utilisation period (bench_nvml_lag.py): a reading lags by it


def lagged_window(r: Runner, phase: dict) -> dict:
    """NVML's readings of a phase's seconds: those taken NVML_PERIOD_S later, as they lag.  A
    cold start's first second read as it came under-read its busy time, most likely as its
    first readings were of the GPU before the start: the batch-8 encoder at 50 from its first
    launch read 31.4 and 40.8 in its first second (H100, stop 55), its unlimited run low by
    as much, where the trace, reading later, read 51.2 and 49.9 (the cold section read this
    way has not run on a GPU yet)."""
    return r.gpu.window(phase["t1"] + NVML_PERIOD_S, phase["t2"] + NVML_PERIOD_S)


# Cold start: a container paced from its first launch (`force`), against a fresh unlimited one.
COLD = (
    (Shape("mm", 4096, sync=4), 70),
    (Shape("mm", 32768, sync=1), 70),
    (Shape("mm", 1024, sync=1), 30),  # launch-bound: alone it stays below the limit
    (Shape("model", 1, seq=64), 30),
    (Shape("model", 8, seq=512), 50),  # samples under NVML's busy time until the feedback acts
)
COLD_PHASES = ((0.0, 1.0), (1.0, 2.0), (2.0, 4.0))  # seconds after the first step
COLD_PHASE_SPEC = ",".join(f"-1:{b - a}" for a, b in COLD_PHASES)  # the worker's --phases


def bench_cold(r: Runner, cold: tuple[tuple[Shape, int], ...] = COLD,
               out: list[dict] | None = None) -> list[dict]:
    """Each cold start's row, appended to `out` as it is done."""
    out = [] if out is None else out
    phases = COLD_PHASE_SPEC
    for shape, limit in cold:
        ref = saturated(r, shape.size, shape.streams) if shape.kind == "mm" else None
        runs = {}
        for lim in (0, limit):
            env = r.container(GPU_CORE_UTILIZATION_POLICY="force", CUDA_DEVICE_SM_LIMIT=str(lim))
            runs[lim] = r.results(r.start(shape, phases, env, 0.0, cold=True))
        points = []
        for (a, b), alone, held in zip(COLD_PHASES, runs[0], runs[limit], strict=True):
            share = (100 * held["steps_per_s"] / ref) if ref else lagged_window(r, held).get(
                "gpu_busy_pct")
            alone_share = (100 * alone["steps_per_s"] / ref) if ref else lagged_window(
                r, alone).get("gpu_busy_pct")
            points.append({
                "seconds": f"{a:g}-{b:g}",
                "share_pct": None if share is None else round(share, 1),
                "alone_share_pct": None if alone_share is None else round(alone_share, 1),
                "pct_of_alone": round(100 * held["steps_per_s"] / alone["steps_per_s"], 1),
                "ok": judge(limit, share, alone_share, held["steps_per_s"],
                            alone["steps_per_s"]),
                "sm_mhz": held.get("sm_mhz"),
                "cost_scale": held.get("cost_scale"),
            })
        row = {"shape": shape.name, "limit": limit, "saturated_steps_per_s": ref,
               "share_basis": "throughput / saturated" if ref else "NVML GPU busy",
               "points": points, "raw": runs}
        print(json.dumps({k: v for k, v in row.items() if k != "raw"}), flush=True)
        out.append(row)
    return out


TRACE_SLICE_S, TRACE_SLICES = 0.5, 12


def bench_trace(r: Runner, shapes: tuple[Shape, ...], limits: tuple[int, ...]) -> list[dict]:
    """Per shape and limit, one container's seconds after the limit is set at run time (after 1 s
    unlimited) and, once, from its first launch: per TRACE_SLICE_S slice, NVML's busy share
    (read NVML_PERIOD_S later, as it lags), the share charged, waited, the cost scale."""
    out = []
    for shape in shapes:
        runs = [(lim, "run time", r.run(shape, f"0:1.0,{lim}:{TRACE_SLICE_S}," + ",".join(
            [f"{lim}:{TRACE_SLICE_S}"] * (TRACE_SLICES - 1)),
            r.container(GPU_CORE_UTILIZATION_POLICY="force"), warm_s=0.0)[1:])
            for lim in limits]
        cold_env = r.container(GPU_CORE_UTILIZATION_POLICY="force",
                               CUDA_DEVICE_SM_LIMIT=str(limits[-1]), LIBCUDA_LOG_LEVEL="4")
        runs.append((limits[-1], "first launch", r.results(r.start(
            shape, ",".join([f"-1:{TRACE_SLICE_S}"] * TRACE_SLICES), cold_env, 0.0, cold=True))))
        for lim, since, res in runs:
            t0 = res[0]["t1"]
            slices = []
            for p in res:
                busy = lagged_window(r, p)
                slices.append({"t": round(p["t1"] - t0, 2),
                               "busy_pct": busy.get("gpu_busy_pct"),
                               "sm_mhz": busy.get("sm_mhz"),
                               **{k: round(p[k], 3) for k in ("charged_pct", "waited_pct",
                                                              "cost_scale", "steps_per_s")
                                  if isinstance(p.get(k), float)}})
            row = {"shape": shape.name, "limit": lim, "since": since, "slices": slices,
                   "feedback_log": res[0].get("feedback_log", [])}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def bench_shared(r: Runner, **extra: str) -> dict:
    """Two containers (4096² sync/4, default policy, low priority) at 30 and 70: both busy, then
    the 30 one idles for a phase, then resumes.  Alone = the 70 one's rate when alone.  `extra`:
    more environment for every container."""
    ph = r.phase_s
    shape = Shape("mm", 4096, sync=4)
    alone = r.run(shape, f"0:{ph}", r.container(**extra))[0]["steps_per_s"]
    start = time.monotonic() + 15.0
    # the first RESUME_SLICES_S after the 30 one resumes measured from their start (no warm-up)
    resumed = ",".join(f"-1:{d}:0" for d in RESUME_SLICES_S)
    pa = r.start(shape, f"-1:{ph},-2:{ph},{resumed},-1:{ph}",
                 r.container(CUDA_DEVICE_SM_LIMIT="30", **extra), start)
    pb = r.start(shape, f"-1:{ph},-1:{ph},{resumed},-1:{ph}",
                 r.container(CUDA_DEVICE_SM_LIMIT="70", **extra), start)
    ra, rb = r.results(pa), r.results(pb)
    pct = [[round(100 * x["steps_per_s"] / alone, 1) for x in rs] for rs in (ra, rb)]
    slices = [{"ms": f"{1e3 * a:g}-{1e3 * b:g}", "30": x, "70": y}
              for (a, b), x, y in zip(resume_bounds(), pct[0][2:-1], pct[1][2:-1], strict=True)]
    return {
        "alone_steps_per_s": alone,
        "both_busy": {"30": pct[0][0], "70": pct[1][0],
                      "ok": abs(pct[0][0] - 30) <= 5 and abs(pct[1][0] - 70) <= 5},
        "30_idle": {"70": pct[1][1], "ok": pct[1][1] >= 90},
        # given back within 100 ms: the 30 one at its share from its first 100 ms on
        "30_resuming": {"slices": slices, "ok": abs(slices[0]["30"] - 30) <= 5},
        "30_resumed": {"30": pct[0][-1], "70": pct[1][-1],
                       "ok": abs(pct[0][-1] - 30) <= 5 and abs(pct[1][-1] - 70) <= 5},
        "raw": [ra, rb],
    }


RESUME_SLICES_S = (0.1, 0.1, 0.3)  # bench_shared: the resumed 30 one's first 0.5 s, in slices


def resume_bounds() -> list[tuple[float, float]]:
    """RESUME_SLICES_S as (from, to) seconds after the resume."""
    ends = [sum(RESUME_SLICES_S[:i + 1]) for i in range(len(RESUME_SLICES_S))]
    return list(zip([0.0, *ends[:-1]], ends, strict=True))


class Weighted(NamedTuple):
    """One container of a bench_weights pair: its gpucores (0: none), its processes, and a shape
    of its own (None: the pair's)."""
    share: int
    procs: int = 1
    shape: Shape | None = None

    @property
    def name(self) -> str:
        return (str(self.share) if self.share else "none") + (
            f" ({self.procs} procs)" if self.procs > 1 else "") + (
            f" of {self.shape.name}" if self.shape else "")


W = Weighted
BUSY, LONG = Shape("mm", 4096, sync=4), Shape("mm", 16384, sync=1)  # ~0.2-ms, ~12-ms kernels
SMALL = Shape("mm", 1024, sync=4)  # launch-bound: ~24 % of the GPU alone, ~14 % in 2 processes
WEIGHT_PAIRS = ((BUSY, W(30), W(30)), (BUSY, W(20), W(50)), (BUSY, W(30), W(70)),
                (BUSY, W(30), W(0)), (BUSY, W(30), W(70, procs=2)), (BUSY, W(30, procs=2), W(70)),
                # kernels longer than the GPU's time slice: a container's two processes cut
                # each other's (limiter.h, lim_split_wait)
                (LONG, W(30), W(70)), (LONG, W(30), W(70, procs=2)), (LONG, W(30, procs=2), W(70)),
                # a launch-bound container whose two processes keep NVML's GPU busy 99 % of the
                # time alone: does the time its contexts take cost the busy neighbour?
                (BUSY, W(30, procs=2, shape=SMALL), W(70)), (BUSY, W(30, shape=SMALL), W(70)))


Window = tuple[float, float]


def union(windows: list[list[Window]], t1: float, t2: float) -> list[Window]:
    """The processes' step windows merged into disjoint spans, clipped to [t1, t2]."""
    spans: list[Window] = []
    for a, b in sorted(w for ws in windows for w in ws):
        a, b = max(a, t1), min(b, t2)
        if a >= b:
            continue
        if spans and a <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], b))
        else:
            spans.append((a, b))
    return spans


def at_once_pct(a: list[list[Window]], b: list[list[Window]], t1: float, t2: float) -> float:
    """% of [t1, t2] in which both sides had a step in flight (launched, not yet synchronised):
    for loops that synchronise each kernel, the time their kernels shared the GPU."""
    ua, ub = union(a, t1, t2), union(b, t1, t2)
    both, i, j = 0.0, 0, 0
    while i < len(ua) and j < len(ub):
        lo, hi = max(ua[i][0], ub[j][0]), min(ua[i][1], ub[j][1])
        both += max(0.0, hi - lo)
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return round(100 * both / (t2 - t1), 1) if t2 > t1 else 0.0


def idle_pct(a: list[list[Window]], b: list[list[Window]], t1: float,
             t2: float) -> dict[str, float]:
    """% of [t1, t2] in which no step of either side was in flight, by what the gap lay between:
    two steps of one process (`process`: its own synchronisation and launch), steps of two
    processes of one side (`sibling`: a split window's part handed on), or of the two sides
    (`other`: the turn handed to the other container).  Gaps at the phase's edges are left out."""
    tagged = sorted((x, y, (side, p)) for side, ws in ((0, a), (1, b))
                    for p, w in enumerate(ws) for x, y in w)
    gaps = {"process": 0.0, "sibling": 0.0, "other": 0.0}
    end, tag = None, None
    for x, y, t in tagged:
        x, y = max(x, t1), min(y, t2)
        if x >= y:
            continue
        if end is not None and tag is not None and x > end:
            kind = "process" if t == tag else "sibling" if t[0] == tag[0] else "other"
            gaps[kind] += x - end
        if end is None or y > end:
            end, tag = y, t
    return {k: round(100 * v / (t2 - t1), 1) if t2 > t1 else 0.0 for k, v in gaps.items()}


def bench_weights(r: Runner, pairs: tuple[tuple[Shape, Weighted, Weighted], ...] = WEIGHT_PAIRS,
                  out: list[dict] | None = None) -> list[dict]:
    """Under `default` gpucores is a weight: two busy containers (low priority) whose shares sum
    to less than 100 split the whole GPU in proportion to them (30 + 30: 50 + 50), as cpu.weight
    does.  Alone = one container's unlimited rate of the shape in the same run; due = each share
    over the pair's sum (a container with no gpucores is due what the other's share leaves; one
    of a shape of its own, launch-bound under its share, is judged against itself alone, all
    its processes, and is due 100: it keeps its speed);
    within target: within 5 points of it, and the GPU not left idle (the pair's sum at least
    90).  A container of several processes counts their throughputs together.  Shapes that
    synchronise each kernel also report how much of the phase the two containers' kernels were
    in flight at once (`at_once_pct`), and a two-process container's own two (`siblings_...`):
    a container's processes that time-slice each other's kernels show there first; and where
    the GPU sat idle between steps (`idle_pct`): a split window's part handed on shows as
    `sibling`.  Every row gives each container's charged and waited time (% of wall time) and
    cost scale, from its region."""
    out = [] if out is None else out
    ph = r.phase_s
    alone: dict[Shape, float] = {}
    for shape, *pair in pairs:
        # what each side runs, and what it is judged against: one process of the pair's shape,
        # or a side's own shape as that container runs alone (all its processes)
        sides = [replace(m.shape or shape, procs=m.procs) for m in pair]
        refs = [side if m.shape else shape for side, m in zip(sides, pair, strict=True)]
        for ref in refs:
            if ref not in alone:
                alone[ref] = r.run(ref, f"0:{ph}", r.container())[0]["steps_per_s"]
        start = time.monotonic() + 15.0
        timeline = shape.sync == 1
        pa, pb = (r.start(side, f"-1:{ph}", r.container(
            **({"CUDA_DEVICE_SM_LIMIT": str(m.share)} if m.share else {})), start,
            timeline=timeline) for side, m in zip(sides, pair, strict=True))
        ra, rb = (r.results(p)[0] for p in (pa, pb))
        got = [round(100 * x["steps_per_s"] / alone[ref], 1)
               for x, ref in zip((ra, rb), refs, strict=True)]
        a, b = (m.share for m in pair)
        due = [round(100 * x / (a + b), 1) for x in (a, b)] if b else [a, 100 - a]
        # a side of its own shape uses less than its share alone: it keeps its speed
        due = [100.0 if m.shape else d for m, d in zip(pair, due, strict=True)]
        row = {"shape": shape.name, "shares": [a, b], "containers": [m.name for m in pair],
               "pct_of_alone": got, "due": due,
               "ok": all(abs(g - d) <= 5 for g, d in zip(got, due, strict=True)) and sum(got) >= 90}
        if timeline:
            t1, t2 = max(ra["t1"], rb["t1"]), min(ra["t2"], rb["t2"])
            row["at_once_pct"] = at_once_pct(ra["windows"], rb["windows"], t1, t2)
            row["siblings_at_once_pct"] = [
                at_once_pct(x["windows"][:1], x["windows"][1:2], t1, t2)
                if len(x["windows"]) > 1 else None for x in (ra, rb)]
            row["gpu_busy_pct"] = ra.get("gpu_busy_pct")
            row["idle_pct"] = idle_pct(ra["windows"], rb["windows"], t1, t2)
        # the containers' own accounts (their regions: all their processes), % of wall time
        row["charged_pct"] = [round(x.get("charged_pct", 0.0), 1) for x in (ra, rb)]
        row["waited_pct"] = [round(x.get("waited_pct", 0.0), 1) for x in (ra, rb)]
        row["cost_scale"] = [x.get("cost_scale") for x in (ra, rb)]  # DVFS x busy feedback
        # a side whose warm-up outlasted the phase measured nothing (0 steps, 0 charged/waited)
        row["warm_overran_s"] = [x.get("warm_overran_s") for x in (ra, rb)]
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


GATE_WAITS = ("sleep", "auto", "yield")


def bench_gate_wait(r: Runner, rounds: int, out: list[dict] | None = None) -> list[dict]:
    """Each way the gate waits (GPUWARDEN_GATE_WAIT), alternated `rounds` times under whatever
    CPU load the run has (--cpu-load): a container of 4096² sync/4 paced alone at 70 (`force`),
    its % of saturated throughput, and the 30 + 70 pair of bench_shared.  Alternating in one run
    keeps the host's drift out of the comparison."""
    out = [] if out is None else out
    shape = Shape("mm", 4096, sync=4)
    ref = saturated(r, shape.size, shape.streams)
    for k in range(rounds):
        for way in GATE_WAITS:
            env = r.container(CUDA_DEVICE_SM_LIMIT="70", GPU_CORE_UTILIZATION_POLICY="force",
                              GPUWARDEN_GATE_WAIT=way)
            alone = r.run(shape, f"-1:{r.phase_s}", env)[0]
            row = {"round": k, "wait": way,
                   "alone_70_pct": round(100 * alone["steps_per_s"] / ref, 1),
                   "shared": bench_shared(r, GPUWARDEN_GATE_WAIT=way)}
            print(json.dumps({k2: v for k2, v in row.items() if k2 != "shared"}
                             | {"shared": {k2: v for k2, v in row["shared"].items()
                                           if k2 != "raw"}}), flush=True)
            out.append(row)
    return out


SHARED_COLD = (Shape("mm", 4096, sync=4), Shape("mm", 8192, sync=1), Shape("mm", 16384, sync=1))


def bench_shared_cold(r: Runner, shapes: tuple[Shape, ...] = SHARED_COLD, rounds: int = 2,
                      out: list[dict] | None = None) -> list[dict]:
    """Two containers at 30 and 70 under `default` whose work starts at the same instant, paced
    from their first launch: each one's share of saturated throughput in seconds 0-1, 1-2 and
    2-4, against one unlimited container started the same way (a process's first second is
    slower alone too: lazy module loading, cuBLAS's first calls, the clock ramping up).  Within
    target: each share within 5 points of its limit's part of that cold alone share."""
    out = [] if out is None else out
    phases = COLD_PHASE_SPEC
    for shape in shapes:
        ref = saturated(r, shape.size, shape.streams)
        cold = r.results(r.start(shape, phases, r.container(), 0.0, cold=True))
        alone = [100 * x["steps_per_s"] / ref for x in cold]
        for k in range(rounds):
            start = time.monotonic() + 15.0
            pa = r.start(shape, phases, r.container(CUDA_DEVICE_SM_LIMIT="30"), start, cold=True)
            pb = r.start(shape, phases, r.container(CUDA_DEVICE_SM_LIMIT="70"), start, cold=True)
            ra, rb = r.results(pa), r.results(pb)
            points = []
            for (a, b), xa, xb, al in zip(COLD_PHASES, ra, rb, alone, strict=True):
                sa = 100 * xa["steps_per_s"] / ref
                sb = 100 * xb["steps_per_s"] / ref
                points.append({"seconds": f"{a:g}-{b:g}", "30": round(sa, 1), "70": round(sb, 1),
                               "alone": round(al, 1),
                               "ok": abs(sa - 0.3 * al) <= 5 and abs(sb - 0.7 * al) <= 5})
            row = {"shape": shape.name, "round": k, "saturated_steps_per_s": ref,
                   "points": points, "raw": [ra, rb, cold]}
            print(json.dumps({k2: v for k2, v in row.items() if k2 != "raw"}), flush=True)
            out.append(row)
    return out


class CpuLoad:
    """`n` processes spinning on the CPU at niceness `nice` for as long as the block runs: a node
    whose data loaders and services keep its cores busy."""

    def __init__(self, n: int, nice: int = 0) -> None:
        self.n, self.nice = n, nice
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> CpuLoad:
        self.procs = [subprocess.Popen(["nice", "-n", str(self.nice), sys.executable, "-c",
                                        "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The spinners stopped (SIGSTOP) for the block: a reference measured on a calm CPU."""
        for p in self.procs:
            p.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            for p in self.procs:
                p.send_signal(signal.SIGCONT)


def timeline_slices(windows: list[list[Window]], samples: list, t0: float, width: float,
                    n: int) -> list[dict]:
    """The `n` slices of `width` s from `t0`: per slice, the steps that ended in it and their
    median time (launched to synchronised, ms), the % of it with a step in flight (`windows`, one
    list per process), and from `samples` (States, or their JSON lists) the % of it charged and
    waited in the gate and in turns (the samples within it), None where no two samples bound
    it."""
    ends = sorted((b, b - a) for ws in windows for a, b in ws)
    states = [State(*x) for x in samples]
    out = []
    for i in range(n):
        a, b = t0 + i * width, t0 + (i + 1) * width
        took = [d for e, d in ends if a <= e < b]
        flight = sum(y - x for x, y in union(windows, a, b))
        row: dict = {"from_ms": round(1e3 * i * width), "steps": len(took),
                     "step_ms": round(1e3 * statistics.median(took), 2) if took else None,
                     "in_flight_pct": round(100 * flight / width, 1),
                     "charged_pct": None, "waited_pct": None, "turns_pct": None}
        before = [x for x in states if x.t <= a]
        upto = [x for x in states if x.t <= b]
        if before and upto and upto[-1].t > before[-1].t:
            s1, s2 = before[-1], upto[-1]
            dt = s2.t - s1.t
            inside = [x.turns for x in states if a <= x.t <= b]
            row |= {"charged_pct": round(100 * (s2.charged_ns - s1.charged_ns) / 1e9 / dt, 1),
                    "waited_pct": round(100 * (s2.waited_ns - s1.waited_ns) / 1e9 / dt, 1),
                    "turns_pct": round(100 * sum(inside) / len(inside)) if inside else None}
        out.append(row)
    return out


NEWCOMER = (Shape("mm", 4096, sync=0), Shape("mm", 16384, sync=0))
NEWCOMER_SLICE_S = 0.1  # the newcomer's first second, told in slices this long
NEWCOMER_AFTER_S = 2.0  # the first container runs alone this long before the second starts


def bench_newcomer(r: Runner, shapes: tuple[Shape, ...] = NEWCOMER, rounds: int = 1,
                   out: list[dict] | None = None) -> list[dict]:
    """A container at 70 (`default`) running a loop that never synchronises, alone for
    NEWCOMER_AFTER_S, then a second one at 30 starts the same matmul, synchronising after each,
    paced from its first launch: its share of saturated throughput in its seconds 0-1 / 1-2 /
    2-4, against the same loop started cold alone.  Within target: within 5 points of 30 % of
    that.  The newcomer's process starts with the first one, loads its tensors and waits, as a
    pod that loaded its model waits for work: it is present all along (so the first one alone is
    not under `hold`, its queue bound is the short one) and is found light while it idles
    (docs/benchmarks.md, stop 42).  `rounds` runs of each shape, alternated: one second's share
    depends on where the turns' windows fall."""
    out = [] if out is None else out
    for rnd, shape in ((i, x) for i in range(rounds) for x in shapes):
        ref = saturated(r, shape.size, shape.streams)
        late = replace(shape, sync=1)
        cold = r.results(r.start(late, COLD_PHASE_SPEC, r.container(), 0.0, cold=True,
                                 timeline=True))
        alone = [100 * x["steps_per_s"] / ref for x in cold]
        start = time.monotonic() + 15.0
        # the first one's run in two phases: alone, then beside the newcomer
        # logging at 3: whether either was found light (out of the turns, claiming), counted
        pa = r.start(shape, f"-1:{NEWCOMER_AFTER_S},-1:{COLD_PHASES[-1][1]}",
                     r.container(CUDA_DEVICE_SM_LIMIT="70", LIBCUDA_LOG_LEVEL="3"), start,
                     states=True)
        # the newcomer at 4: its turn windows too (which period its kernels asked for, when)
        pb = r.start(late, COLD_PHASE_SPEC,
                     r.container(CUDA_DEVICE_SM_LIMIT="30", LIBCUDA_LOG_LEVEL="4"),
                     start + NEWCOMER_AFTER_S, cold=True, timeline=True, states=True)
        ra, rb = r.results(pa), r.results(pb)
        points = []
        for (a, b), xb, al in zip(COLD_PHASES, rb, alone, strict=True):
            sb = 100 * xb["steps_per_s"] / ref
            points.append({"seconds": f"{a:g}-{b:g}", "30": round(sb, 1), "alone": round(al, 1),
                           "ok": abs(sb - 0.3 * al) <= 5})
        paired = ra[-1]
        # the first second in slices: the newcomer's steps and gate, beside the first one's
        # gate over the same slices and the cold-alone loop's steps over its own first second
        t0, n = rb[0]["t1"], round(1 / NEWCOMER_SLICE_S)
        sliced = timeline_slices(rb[0].get("windows", []), rb[0].get("states", []), t0,
                                 NEWCOMER_SLICE_S, n)
        beside = timeline_slices([], paired.get("states", []), t0, NEWCOMER_SLICE_S, n)
        alone_first = timeline_slices(cold[0].get("windows", []), [], cold[0]["t1"],
                                      NEWCOMER_SLICE_S, n)
        for x, f, al in zip(sliced, beside, alone_first, strict=True):
            x |= {"first_charged_pct": f["charged_pct"], "first_waited_pct": f["waited_pct"],
                  "first_turns_pct": f["turns_pct"], "alone_steps": al["steps"],
                  "alone_step_ms": al["step_ms"]}
        row = {"shape": shape.name, "round": rnd + 1, "first_second": sliced,
               "first_pct_overall": round(100 * sum(x["steps_per_s"] * (x["t2"] - x["t1"])
                                                    for x in ra)
                                          / sum(x["t2"] - x["t1"] for x in ra) / ref, 1),
               "first_paired": {"pct": round(100 * paired["steps_per_s"] / ref, 1),
                                "charged_pct": round(paired.get("charged_pct", 0.0), 1),
                                "waited_pct": round(paired.get("waited_pct", 0.0), 1)},
               "found_light": [ra[-1].get("found_light"), rb[-1].get("found_light")],
               "newcomer_log": {"light": rb[-1].get("light_verdicts", []),
                                # its first second's changes, timed from its first step
                                "turns": stamped_since(rb[-1].get("turn_log", []), t0, 1.0),
                                "paces": stamped_since(rb[-1].get("pace_log", []), t0, 1.0),
                                "claims": rb[-1].get("claim_log", [])},
               "first_paces": stamped_since(ra[-1].get("pace_log", []), t0, 1.0),
               "newcomer_paired": {"charged_pct": round(rb[-1].get("charged_pct", 0.0), 1),
                                   "waited_pct": round(rb[-1].get("waited_pct", 0.0), 1),
                                   "step_p50_ms": rb[-1].get("step_p50_ms")},
               "points": points, "raw": [ra, rb, cold]}
        print(json.dumps({k: v for k, v in row.items() if k != "raw"}), flush=True)
        out.append(row)
    return out


def bench_priority(r: Runner) -> dict:
    """Priority (issue 18), all under `default` unless named, 4096² bf16 matmuls (~200 µs):
    a low-priority container with gpucores 30 alone (not held: % of the same run's unlimited
    phase); a high-priority one (gpucores 30) flat out beside a low one (gpucores 30); a high one
    busy 30 % of the time in bursts (32 matmuls, synchronised, then idle) beside a low one
    flat out (the low one should get what it leaves); the start of a high one's bursts (one
    1024² matmul, synchronised, then idle 8 ms: its burst's time from launch to the end of the
    synchronisation, beside the low one less alone) while the low one holds the GPU; two high
    ones flat out (neither held to its gpucores); and both capped under `force`."""
    ph = r.phase_s
    flat, part = Shape("mm", 4096, sync=4), Shape("mm", 4096, sync=32, duty=0.3)
    probe = Shape("mm", 1024, sync=1, idle_ms=8.0)
    low30 = {"CUDA_TASK_PRIORITY": "1", "CUDA_DEVICE_SM_LIMIT": "30"}
    high30 = {"CUDA_TASK_PRIORITY": "0", "CUDA_DEVICE_SM_LIMIT": "30"}
    # one low process: unlimited, then gpucores 30 (set at run time), alone
    lo = r.run(flat, f"0:{ph},30:{ph}", r.container(CUDA_TASK_PRIORITY="1"))
    alone = lo[0]["steps_per_s"]
    out: dict = {"alone_steps_per_s": alone,
                 "low_alone_30_pct_of_unlimited": round(100 * lo[1]["steps_per_s"] / alone, 1)}
    part_alone = r.run(part, f"-1:{ph}", r.container(**high30))[0]
    probe_alone = r.run(probe, f"-1:{ph}", r.container(**high30))[0]
    # the SM clock and power too: a high one's bursts beside a busy low one run on a GPU the
    # low one keeps at its power cap
    out["high_busy_30_alone"] = {k: part_alone.get(k) for k in ("steps_per_s", "gpu_busy_pct",
                                                                "sm_mhz", "power_w")}
    out["burst_alone_ms"] = {"p50": probe_alone["step_p50_ms"], "p99": probe_alone["step_p99_ms"]}
    pairs = (("default", flat, high30, flat, low30, "default"),
             ("default_high_busy_30", part, high30, flat, low30, "default"),
             ("burst_start", probe, high30, flat, low30, "default"),
             ("highs_only", flat, high30, flat, high30, "default"),
             ("force", flat, high30, flat, low30, "force"))
    for name, a_shape, a_env, b_shape, b_env, policy in pairs:
        start = time.monotonic() + 12.0
        pa = r.start(a_shape, f"-1:{2 * ph}", r.container(**a_env,
                                                         GPU_CORE_UTILIZATION_POLICY=policy), start)
        pb = r.start(b_shape, f"-1:{2 * ph}", r.container(**b_env,
                                                         GPU_CORE_UTILIZATION_POLICY=policy), start)
        ra, rb = r.results(pa)[0], r.results(pb)[0]
        a_alone = {id(part): part_alone["steps_per_s"],
                   id(probe): probe_alone["steps_per_s"]}.get(id(a_shape), alone)
        row = {"high_pct_of_alone": round(100 * ra["steps_per_s"] / a_alone, 1),
               "other_pct_of_alone": round(100 * rb["steps_per_s"] / alone, 1),
               "gpu": r.gpu.window(max(ra["t1"], rb["t1"]), min(ra["t2"], rb["t2"]))}
        if a_shape is probe:
            base = probe_alone["step_p50_ms"]
            row["burst_ms"] = {"p50": ra["step_p50_ms"], "p99": ra["step_p99_ms"],
                               "bursts": ra["steps"]}
            row["start_delay_ms"] = {"p50": round(ra["step_p50_ms"] - base, 3),
                                     "p99": round(ra["step_p99_ms"] - base, 3)}
        out[name] = row
        print(json.dumps({name: row}), flush=True)
    return out


# requests of 8 × 4096² (~1.5 ms on the H200) every ~20 ms (~7 % busy alone: under half its
# share), every ~6.5 ms (~23 %: most of its share) and every ~4 ms (~35 %: more than its share,
# which it should still get), of one 1024² every ~2 ms (tiny requests, hundreds a second), and
# of 2 × 16384² (~24 ms on the H100) every ~125 ms (~19 %: requests longer than a light claim's
# 10 ms, limiter.h LIM_LIGHT_RUN_BUSY_PCT)
LIGHT_SERVICES = (Shape("mm", 4096, sync=8, idle_ms=20.0), Shape("mm", 4096, sync=8, idle_ms=5.0),
                  Shape("mm", 4096, sync=8, idle_ms=2.5), Shape("mm", 1024, sync=1, idle_ms=2.0),
                  Shape("mm", 16384, sync=2, idle_ms=100.0))


def bench_light(r: Runner, services: tuple[Shape, ...] = LIGHT_SERVICES,
                out: list[dict] | None = None) -> list[dict]:
    """A request service with gpucores 30 that uses a few % of the GPU (requests of a few
    matmuls, synchronised, then idle) beside a busy loop at 70 (4096² sync/4), both `default`:
    under `default` the service should keep its alone speed and request latency, and the loop
    get what the service leaves.  Each against itself alone (default policy, so not held).
    Its warm-up runs the requests back to back, no idle: a burst, which holds the service back
    for a claim that ran on (limiter.h, LIM_LIGHT_RUN_MAX_NS) before its measured phase."""
    out = [] if out is None else out
    ph = r.phase_s
    busy = Shape("mm", 4096, sync=4)
    busy_alone = r.run(busy, f"-1:{ph}", r.container(CUDA_DEVICE_SM_LIMIT="70"))[0]
    for svc in services:
        alone = r.run(svc, f"-1:{2 * ph}", r.container(CUDA_DEVICE_SM_LIMIT="30"))[0]
        start = time.monotonic() + 12.0
        # (the shim's log says when a container is found light: counted in the row)
        pa = r.start(svc, f"-1:{2 * ph}", r.container(CUDA_DEVICE_SM_LIMIT="30",
                                                       LIBCUDA_LOG_LEVEL="3"), start)
        pb = r.start(busy, f"-1:{2 * ph}", r.container(CUDA_DEVICE_SM_LIMIT="70",
                                                        LIBCUDA_LOG_LEVEL="3"), start)
        ra, rb = r.results(pa)[0], r.results(pb)[0]
        svc_pct = 100 * ra["steps_per_s"] / alone["steps_per_s"]
        busy_pct = 100 * rb["steps_per_s"] / busy_alone["steps_per_s"]
        # the same pair with no gate at all (`disable`): what the GPU itself gives the service
        # beside the loop (its clock at the loop's power cap, the context switches)
        start = time.monotonic() + 12.0
        raw = [r.start(s, f"-1:{2 * ph}", r.container(CUDA_DEVICE_SM_LIMIT=lim,
                                                       GPU_CORE_UTILIZATION_POLICY="disable"),
                       start) for s, lim in ((svc, "30"), (busy, "70"))]
        rra, rrb = (r.results(p)[0] for p in raw)
        # due: 95 % of its alone speed, or, when it alone uses more than its 30 % share, its
        # share less 5 points (issue 18)
        used = alone.get("gpu_busy_pct") or 0.0
        due = 95.0 if used <= 30 else 100 * 25 / used
        row = {"service": svc.name, "service_busy_alone_pct": alone.get("gpu_busy_pct"),
               "service_pct_of_alone": round(svc_pct, 1),
               "request_ms_alone": [alone["step_p50_ms"], alone["step_p99_ms"]],
               "request_ms": [ra["step_p50_ms"], ra["step_p99_ms"]],
               "busy_pct_of_alone": round(busy_pct, 1),
               "found_light": [ra["found_light"], rb["found_light"]],
               "service_light_verdicts": ra["light_verdicts"],
               "sm_mhz": [alone.get("sm_mhz"), ra.get("sm_mhz")],
               "raw_pct_of_alone": [round(100 * rra["steps_per_s"] / alone["steps_per_s"], 1),
                                    round(100 * rrb["steps_per_s"] / busy_alone["steps_per_s"],
                                          1)],
               "due_pct_of_alone": round(due, 1), "ok": svc_pct >= due}
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def markdown(res: dict) -> str:
    lines = [f"Machine: {res['machine']}  ", f"Command: `{res['command']}`  ",
             f"Total time: {res['seconds']:.0f} s", ""]
    if res.get("cut"):
        lines += [f"**Cut short:** {res['cut']}.", ""]
    n, nice = res.get("cpu_load", (0, 0))
    if n:
        lines += [f"While {n} processes spun on the CPU (nice {nice}).", ""]
    if res.get("probe"):
        lines += ["| matmul (no libvgpu) | graph µs/matmul | isolated event µs (min/p50) | "
                  "chained event µs (min/p50) |", "| --- | --- | --- | --- |"]
        for p in res["probe"]:
            lines.append(f"| {p['size']}² | {p['graph_us_per_matmul']} | "
                         f"{p['isolated_event_us_min']} / {p['isolated_event_us_p50']} | "
                         f"{p['chained_event_us_min']} / {p['chained_event_us_p50']} |")
        lines.append("")
    if res.get("shapes"):
        lims = [str(p["limit"]) for p in res["shapes"][0]["points"]]
        lines += ["| shape (force) | alone: share % (basis) | " + " | ".join(lims) + " | "
                  f"% of alone at {'/'.join(lims)} | interleaved: % of alone (waited %), control | "
                  f"GPU busy % alone; at {'/'.join(lims)} (✓/✗: held in GPU time where it is "
                  "launch-bound by throughput but uses the limit's GPU time alone) | all within "
                  "target |",
                  "| --- | --- | " + "--- | " * len(lims) + "--- | --- | --- | --- |"]
        for s in res["shapes"]:
            pts = s["points"]
            cells = [f"{p['share_pct']}{'' if p['ok'] else ' ✗'}" for p in pts]
            ab = " / ".join(f"{p['limit']}: {p['ab']['pct_of_alone']} ({p['ab']['waited_pct']})"
                            for p in pts if "ab" in p)
            ab += next((f", control {p['ab']['null_pct']}" for p in pts if "ab" in p), "")
            marks = {True: " ✓", False: " ✗", None: ""}
            held = f"{s.get('alone_busy_pct')}; " + " / ".join(
                f"{p.get('gpu_busy_pct')}{marks[p.get('busy_ok')]}" for p in pts)
            lines.append(
                f"| {s['shape']} | {s['alone_share_pct']} ({s['share_basis']}) | "
                + " | ".join(cells)
                + f" | {' / '.join(str(p['pct_of_alone']) for p in pts)} | {ab or '-'} | {held} | "
                f"{all(p['ok'] for p in pts)} |")
        lines.append("")
    if res.get("cold"):
        heads = [p["seconds"] for p in res["cold"][0]["points"]]
        lines += ["| paced from the first launch (force) | limit | share % in s "
                  + " / ".join(heads) + " | unlimited, same seconds | % of unlimited |",
                  "| --- | --- | --- | --- | --- |"]
        for c in res["cold"]:
            pts = c["points"]
            lines.append(
                f"| {c['shape']} ({'tput' if c['saturated_steps_per_s'] else 'busy'}) | "
                f"{c['limit']} | "
                + " / ".join(f"{p['share_pct']}{'' if p['ok'] else ' ✗'}" for p in pts)
                + " | " + " / ".join(str(p["alone_share_pct"]) for p in pts)
                + " | " + " / ".join(str(p["pct_of_alone"]) for p in pts) + " |")
        lines.append("")
    for t in res.get("trace", []):
        lines += [f"{t['shape']} at {t['limit']} % from the {t['since']} (force), per "
                  f"{TRACE_SLICE_S}-s slice: busy % / charged % / waited % / cost scale", "",
                  "| t s | " + " | ".join(str(x["t"]) for x in t["slices"]) + " |",
                  "| --- |" + " --- |" * len(t["slices"])]
        for k in ("busy_pct", "charged_pct", "waited_pct", "cost_scale"):
            lines.append(f"| {k} | " + " | ".join(str(x.get(k, "")) for x in t["slices"]) + " |")
        lines.append("")
        if t.get("feedback_log"):
            lines += [f"- {x}" for x in t["feedback_log"]] + [""]
    sh = res.get("shared")
    if sh:
        lines += [f"Two containers 30 + 70 (default policy), % of alone: both busy "
                  f"{sh['both_busy']['30']} + {sh['both_busy']['70']}; 30 idle: 70 gets "
                  f"{sh['30_idle']['70']}; 30 resuming, by ms after its resume: "
                  + "; ".join(f"{x['ms']}: {x['30']} + {x['70']}"
                              for x in sh["30_resuming"]["slices"])
                  + f"; 30 resumed (from 1 s on): {sh['30_resumed']['30']} + "
                  f"{sh['30_resumed']['70']}.", ""]
    if res.get("weights"):
        lines += ["Busy containers under `default`, % of one alone: gpucores as weights (due: "
                  "each share over the pair's sum)", "",
                  "| shape | gpucores | got | due | within 5 points, GPU ≥ 90 % used |",
                  "| --- | --- | --- | --- | --- |"]
        for w in res["weights"]:
            lines.append(f"| {w.get('shape', '')} | {' + '.join(w['containers'])} | "
                         f"{' + '.join(map(str, w['pct_of_alone']))} | "
                         f"{' + '.join(map(str, w['due']))} | {'✓' if w['ok'] else '✗'} |")
        lines.append("")
    if res.get("gate_wait"):
        lines += ["| round | gate waits | alone at 70 (force): % of saturated | 30 + 70 both busy, "
                  "% of alone | 30 idle: 70 gets | 30 resumed |", "| --- | --- | --- | --- | --- "
                  "| --- |"]
        for g in res["gate_wait"]:
            x = g["shared"]
            lines.append(f"| {g['round']} | {g['wait']} | {g['alone_70_pct']} | "
                         f"{x['both_busy']['30']} + {x['both_busy']['70']} | {x['30_idle']['70']} "
                         f"| {x['30_resumed']['30']} + {x['30_resumed']['70']} |")
        lines.append("")
    if res.get("light"):
        lines += ["A request service (gpucores 30) beside a busy loop at 70 (4096² sync/4), both "
                  "`default`: the service's throughput and request time (p50 / p99 ms) against "
                  "itself alone, the loop's throughput against itself alone (✗: the service "
                  "under 95 % of alone, or, using more than its share alone, under 25 % of the "
                  "GPU)", "",
                  "| service (GPU busy alone %) | service, % of alone | request ms alone | "
                  "request ms beside the loop | loop, % of alone | found light: service, loop | "
                  "SM MHz: service alone, beside | no gate (`disable`): service, loop % of alone |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for x in res["light"]:
            lines.append(f"| {x['service']} ({x['service_busy_alone_pct']}) | "
                         f"{x['service_pct_of_alone']}{'' if x['ok'] else ' ✗'} | "
                         f"{x['request_ms_alone'][0]} / {x['request_ms_alone'][1]} | "
                         f"{x['request_ms'][0]} / {x['request_ms'][1]} | "
                         f"{x['busy_pct_of_alone']} | "
                         f"{', '.join(map(str, x.get('found_light', ['?', '?'])))} | "
                         f"{', '.join(map(str, x.get('sm_mhz', ['?', '?'])))} | "
                         f"{' + '.join(map(str, x.get('raw_pct_of_alone', ['?', '?'])))} |")
        lines.append("")
    if res.get("newcomer"):
        lines += [f"A container at 70 (default policy) alone for {NEWCOMER_AFTER_S:g} s, never "
                  "synchronising, then one at 30 starts (synchronising after each matmul, paced "
                  "from its first launch): the newcomer's % of saturated throughput, seconds "
                  "0-1 / 1-2 / 2-4; alone: its loop started cold alone (✗: more than 5 points "
                  "from 30 % of that); the first one's over its whole run, and beside the "
                  "newcomer (its GPU time charged and its time waited in the gate, % of wall "
                  "time); the newcomer's charged and waited in its seconds 2-4, and its "
                  "step's p50; times each was found light (first, newcomer)", "",
                  "| shape of the first | newcomer | alone | first, whole run | first, beside: "
                  "% (charged, waited) | newcomer: charged, waited, step ms | found light |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for c in res["newcomer"]:
            pts = c["points"]
            fp, nb = c.get("first_paired", {}), c.get("newcomer_paired", {})
            rnd = f" (round {c['round']})" if c.get("round", 1) > 1 else ""
            lines.append(f"| {c['shape']}{rnd} | "
                         + " / ".join(f"{p['30']}{'' if p['ok'] else ' ✗'}" for p in pts) + " | "
                         + " / ".join(str(p["alone"]) for p in pts) + " | "
                         + f"{c['first_pct_overall']} | "
                         + f"{fp.get('pct', '?')} ({fp.get('charged_pct', '?')}, "
                         + f"{fp.get('waited_pct', '?')}) | {nb.get('charged_pct', '?')}, "
                         + f"{nb.get('waited_pct', '?')}, {nb.get('step_p50_ms', '?')} | "
                         + f"{', '.join(map(str, c.get('found_light', ['?', '?'])))} |")
        lines.append("")
        for c in res["newcomer"]:
            if not c.get("first_second") or c.get("round", 1) > 1:  # the first round's
                continue
            lines += [f"The newcomer's first second beside {c['shape']}, in "
                      f"{1e3 * NEWCOMER_SLICE_S:g}-ms slices: its steps ended in the slice and "
                      "their median time (launched to synchronised), the % of the slice with a "
                      "step in flight, its gate's charged and waited time (% of the slice) and "
                      "the % of the slice in turns; the first one's charged, waited and turns; "
                      "the same loop started cold alone: its steps and step time", "",
                      "| ms | steps | step ms | in flight | charged | waited | turns | first: "
                      "charged, waited, turns | alone: steps, step ms |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for x in c["first_second"]:
                lines.append(f"| {x['from_ms']} | {x['steps']} | {x['step_ms']} | "
                             f"{x['in_flight_pct']} | {x['charged_pct']} | {x['waited_pct']} | "
                             f"{x['turns_pct']} | {x['first_charged_pct']}, "
                             f"{x['first_waited_pct']}, {x['first_turns_pct']} | "
                             f"{x['alone_steps']}, {x['alone_step_ms']} |")
            lines.append("")
    if res.get("shared_cold"):
        lines += ["Two containers 30 + 70 (default policy) starting together, paced from the first "
                  "launch: % of saturated throughput, seconds 0-1 / 1-2 / 2-4; alone: one "
                  "unlimited container started the same way (✗: a share more than 5 points "
                  "from its limit's part of that)", "",
                  "| shape | round | 30 | 70 | alone |", "| --- | --- | --- | --- | --- |"]
        for c in res["shared_cold"]:
            pts = c["points"]
            lines.append(f"| {c['shape']} | {c['round']} | "
                         + " / ".join(f"{p['30']}{'' if p['ok'] else ' ✗'}" for p in pts) + " | "
                         + " / ".join(str(p["70"]) for p in pts) + " | "
                         + " / ".join(str(p["alone"]) for p in pts) + " |")
        lines.append("")
    pr = res.get("priority")
    if pr:
        lines += ["| priority (4096², gpucores 30 each) | high: % of its alone | other: % of "
                  "alone | GPU busy % | SM MHz | W |", "| --- | --- | --- | --- | --- | --- |"]
        names = {"default": "high flat out beside a low (`default`)",
                 "default_high_busy_30": "high busy 30 % in bursts beside a low flat out",
                 "burst_start": "high 1024² bursts every 8 ms beside a low flat out",
                 "highs_only": "two highs flat out (other = the second high)",
                 "force": "high + low, both capped (`force`)"}
        for k, label in names.items():
            x = pr[k]
            g = x["gpu"]
            lines.append(f"| {label} | {x['high_pct_of_alone']} | {x['other_pct_of_alone']} | "
                         f"{g.get('gpu_busy_pct', '')} | {g.get('sm_mhz', '')} | "
                         f"{g.get('power_w', '')} |")
        h = pr["high_busy_30_alone"]
        lines += ["", f"The high one busy 30 % in bursts, alone: {h['gpu_busy_pct']} % busy, "
                  f"{h['sm_mhz']} MHz, {h['power_w']} W."]
        b = pr["burst_start"]
        lines += ["", f"Low alone at gpucores 30 (`default`): {pr['low_alone_30_pct_of_unlimited']}"
                  f" % of its unlimited phase. High bursts (launch to end of synchronisation, ms): "
                  f"alone p50 {pr['burst_alone_ms']['p50']} / p99 {pr['burst_alone_ms']['p99']}; "
                  f"beside the low one p50 {b['burst_ms']['p50']} / p99 {b['burst_ms']['p99']} "
                  f"({b['burst_ms']['bursts']} bursts): start delay p50 "
                  f"{b['start_delay_ms']['p50']} / p99 {b['start_delay_ms']['p99']} ms."]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker")
    w.add_argument("--shape", required=True)
    w.add_argument("--phases", required=True,
                   help="LIMIT:SECONDS[:WARM],... (-1 as is, -2 idle; WARM: this phase's "
                   "unmeasured seconds, default --warm)")
    w.add_argument("--start-at", type=float, default=0.0)
    w.add_argument("--warm", type=float, default=0.7)
    w.add_argument("--cold", action="store_true", help="no warm-up: measure from the first step")
    w.add_argument("--timeline", action="store_true",
                   help="record each synchronised step's window (launched, synchronised)")
    w.add_argument("--states", action="store_true",
                   help="record the container's compute state every 10 ms (sample_states)")
    pr = sub.add_parser("probe")
    pr.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 2048, 4096, 8192])
    ap.add_argument("--out", type=Path, default=Path("bench_compute_shapes_out"))
    ap.add_argument("--only", default="shapes,cold,shared,priority",
                    help=f"comma list of sections, of: {', '.join(SECTIONS)}")
    ap.add_argument("--shapes", default="", help="comma list of shape indexes to run (default all)")
    ap.add_argument("--services", default="",
                    help="comma list of `light` service indexes to run (default all)")
    ap.add_argument("--pairs", default="",
                    help="weights: comma list of WEIGHT_PAIRS indexes to run (default all)")
    ap.add_argument("--cold-starts", default="",
                    help="comma list of cold-start indexes (default all)")
    ap.add_argument("--shared-cold-rounds", type=int, default=2,
                    help="rounds per shape of the sharedcold section")
    ap.add_argument("--newcomer-shapes", default="",
                    help="comma list of newcomer shape indexes (0: 4096², 1: 16384²; default all)")
    ap.add_argument("--newcomer-rounds", type=int, default=1,
                    help="runs of each newcomer shape, alternated")
    ap.add_argument("--gate-wait-rounds", type=int, default=2,
                    help="rounds of the gatewait section (each runs every way once)")
    ap.add_argument("--cpu-load", type=int, default=0,
                    help="processes spinning on the CPU while the sections run (default none)")
    ap.add_argument("--cpu-load-nice", type=int, default=0,
                    help="their niceness (0: the benchmark's own weight; 19: the least)")
    ap.add_argument("--shim", type=Path, help="a libvgpu.so to run instead of this tree's build")
    ap.add_argument("--phase", type=float, default=2.0, help="seconds per phase")
    ap.add_argument("--warm", type=float, default=0.7, help="seconds of a phase not measured")
    ap.add_argument("--limits", default=",".join(map(str, LIMITS)),
                    help="comma list of the limits each shape goes through (percent, 1..99)")
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        try:
            phases = parse_phases(args.phases)
        except ValueError as e:
            ap.error(str(e))
        return worker(args, phases)
    if args.cmd == "probe":
        return probe(args)
    only = set(filter(None, args.only.split(",")))
    if only - set(SECTIONS):
        ap.error(f"--only: unknown {sorted(only - set(SECTIONS))} (valid: {', '.join(SECTIONS)})")
    try:
        if any(int(x) < 0 for x in f"{args.shapes},{args.pairs},{args.services},"
               f"{args.newcomer_shapes}".split(",") if x):
            raise ValueError("negative index")
        idx = [int(x) for x in args.shapes.split(",") if x] or list(range(len(SHAPES)))
        shapes = tuple(SHAPES[i] for i in idx)
        pairs = tuple(WEIGHT_PAIRS[int(x)] for x in args.pairs.split(",") if x) or WEIGHT_PAIRS
        services = tuple(LIGHT_SERVICES[int(x)] for x in args.services.split(",") if x) \
            or LIGHT_SERVICES
        newcomers = tuple(NEWCOMER[int(x)] for x in args.newcomer_shapes.split(",") if x) \
            or NEWCOMER
    except (ValueError, IndexError):
        ap.error(f"--shapes {args.shapes!r} / --pairs {args.pairs!r} / --services "
                 f"{args.services!r} / --newcomer-shapes {args.newcomer_shapes!r}: indexes "
                 f"0..{len(SHAPES) - 1} / 0..{len(WEIGHT_PAIRS) - 1} / "
                 f"0..{len(LIGHT_SERVICES) - 1} / 0..{len(NEWCOMER) - 1}, comma separated")
    try:
        cold = tuple(COLD[int(x)] for x in args.cold_starts.split(",") if x) or COLD
    except (ValueError, IndexError):
        ap.error(f"--cold-starts {args.cold_starts!r}: indexes 0..{len(COLD) - 1}, comma "
                 "separated")
    if args.shared_cold_rounds < 1:
        ap.error(f"--shared-cold-rounds {args.shared_cold_rounds}: at least 1")
    if args.newcomer_rounds < 1:
        ap.error(f"--newcomer-rounds {args.newcomer_rounds}: at least 1")
    if args.gate_wait_rounds < 1:
        ap.error(f"--gate-wait-rounds {args.gate_wait_rounds}: at least 1")
    if args.cpu_load < 0:
        ap.error(f"--cpu-load {args.cpu_load}: 0 or more processes")
    if not 0 <= args.cpu_load_nice <= 19:
        ap.error(f"--cpu-load-nice {args.cpu_load_nice}: 0..19")
    if args.shim is not None and not args.shim.is_file():
        ap.error(f"--shim {args.shim}: no such file (a built libvgpu.so)")
    try:
        limits = tuple(int(x) for x in args.limits.split(",") if x)
    except ValueError:
        limits = ()
    if not limits or not all(1 <= x <= 99 for x in limits):
        ap.error(f"--limits {args.limits!r}: percentages 1..99, comma separated")
    t0 = time.monotonic()
    gpu = Gpu()
    res: dict = {"machine": f"{platform.node()} ({_gpu_name()})",
                 "command": " ".join([Path(sys.executable).name, *sys.argv]), "gpu": gpu.info,
                 "cpu_load": [args.cpu_load, args.cpu_load_nice]}
    if "probe" in only:
        done = subprocess.run([sys.executable, __file__, "probe"], capture_output=True,
                              text=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                           if k != "LD_PRELOAD"})
        res["probe"] = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        if done.returncode:
            res["probe_error"] = done.stderr[-2000:]
    # a run stopped by `timeout` (SIGTERM) still writes the rows it finished, with a note
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    try:
        with (tempfile.TemporaryDirectory(prefix="bench-shapes-") as tmp,
              CpuLoad(args.cpu_load, args.cpu_load_nice) as load):
            r = Runner(Path(tmp), gpu, args.phase, args.warm, args.shim, load)
            if "shapes" in only:
                bench_shapes(r, shapes, limits, out=res.setdefault("shapes", []))
            if "cold" in only:
                bench_cold(r, cold, out=res.setdefault("cold", []))
            if "trace" in only:
                res["trace"] = bench_trace(r, shapes, limits)
            if "shared" in only:
                res["shared"] = bench_shared(r)
            if "weights" in only:
                bench_weights(r, pairs, out=res.setdefault("weights", []))
            if "newcomer" in only:
                bench_newcomer(r, newcomers, rounds=args.newcomer_rounds,
                               out=res.setdefault("newcomer", []))
            if "sharedcold" in only:
                bench_shared_cold(r, rounds=args.shared_cold_rounds,
                                  out=res.setdefault("shared_cold", []))
            if "priority" in only:
                res["priority"] = bench_priority(r)
            if "light" in only:
                bench_light(r, services, out=res.setdefault("light", []))
            if "gatewait" in only:
                bench_gate_wait(r, args.gate_wait_rounds, out=res.setdefault("gate_wait", []))
    except SystemExit:
        res["cut"] = f"stopped (SIGTERM) after {time.monotonic() - t0:.0f} s: the rows below " \
                     "are those finished"
        raise
    finally:
        gpu.close()
        res["seconds"] = time.monotonic() - t0
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_compute_shapes.json").write_text(json.dumps(res, indent=2) + "\n")
        (args.out / "bench_compute_shapes.md").write_text(markdown(res))
        print(markdown(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
