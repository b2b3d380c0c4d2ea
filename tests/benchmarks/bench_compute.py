"""Compute-limiter benchmark on a real GPU (issue 7): run on the H200 host, takes < 4 minutes.

    make -C libvgpu && python3 tests/benchmarks/bench_compute.py --out /tmp/bench_compute

Writes <out>/bench_compute.json and <out>/bench_compute.md.  What it measures, each against an
unlimited run in the same invocation:

1. bf16 matmul loops (4096², 1024² eager, 1024² as CUDA graphs of 20 matmuls), one process each,
   GPU_CORE_UTILIZATION_POLICY=force: an unlimited phase, then limits 10/30/50/70 set at run time
   through the container region (libvgpu.region), each phase measured after its first second;
   achieved = throughput / unlimited throughput.
2. Two containers (4096², low priority, default policy) at 30 and 70 sharing the GPU.
3. A high-priority job (4096², no limit) sharing with a low-priority one: its throughput over its
   alone (unlimited) throughput, and what the low-priority job got.
4. Launch overhead with no limit: an empty-kernel cuLaunchKernel loop with and without libvgpu,
   alternated, median of medians.

Workers are this same file (`worker` subcommand) so every process starts alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LIMITS = (10, 30, 50, 70)
PHASE_S = 3.0  # each limit phase; the first second of each is not measured
WARM_S = 1.0


# ---- worker -----------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    import torch

    from libvgpu.region import Region

    n = args.size
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    per_step = 1

    def eager() -> None:
        torch.matmul(a, b, out=c)

    step = eager
    if args.graph:
        per_step = args.graph
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                eager()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(per_step):
                eager()
        step = g.replay
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    region = Region.open(os.environ["CUDA_DEVICE_MEMORY_SHARED_CACHE"])
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    for phase in args.phases.split(","):
        limit_s, _, dur_s = phase.partition(":")
        limit, dur = int(limit_s), float(dur_s)
        if limit >= 0:
            region.set_compute_limit(0, limit)
        t0 = time.monotonic()
        while time.monotonic() < t0 + WARM_S:
            step()
        torch.cuda.synchronize()
        t1, iters = time.monotonic(), 0
        while time.monotonic() < t0 + dur:
            step()
            iters += 1
        torch.cuda.synchronize()
        t2 = time.monotonic()
        state = region.compute_state(0)
        print(json.dumps({"limit": limit, "matmuls_per_s": iters * per_step / (t2 - t1),
                          "effective_pct": state.effective_pct, "sharing": state.sharing,
                          "yielding": state.yielding}), flush=True)
    region.close()
    return 0


# ---- driver -----------------------------------------------------------------------------------


class Runner:
    def __init__(self, tmp: Path) -> None:
        from libvgpu.paths import shim_path

        self.tmp = tmp
        self.shim = str(shim_path())
        self.count = 0

    def env(self, **extra: str) -> dict[str, str]:
        self.count += 1
        env = dict(os.environ)
        for k in ("CUDA_DEVICE_SM_LIMIT", "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY"):
            env.pop(k, None)
        env.update(LD_PRELOAD=self.shim, GPUWARDEN_NODE_REGION=str(self.tmp / "node.region"),
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(self.tmp / f"c{self.count}.region"))
        env.update(extra)
        return env

    def start(self, size: int, phases: str, graph: int = 0, start_at: float = 0.0,
              **extra: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, __file__, "worker", "--size", str(size), f"--phases={phases}",
               "--graph", str(graph), "--start-at", str(start_at)]
        return subprocess.Popen(cmd, env=self.env(**extra), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def results(p: subprocess.Popen[str]) -> list[dict]:
        out, err = p.communicate(timeout=200)
        if p.returncode != 0:
            raise SystemExit(f"worker failed (rc {p.returncode}):\n{err[-4000:]}")
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def bench_limits(r: Runner, size: int, graph: int) -> dict:
    phases = ",".join(["0:2.5"] + [f"{lim}:{PHASE_S}" for lim in LIMITS] + ["0:2.5"])
    res = r.results(r.start(size, phases, graph, GPU_CORE_UTILIZATION_POLICY="force"))
    base = statistics.mean([res[0]["matmuls_per_s"], res[-1]["matmuls_per_s"]])
    points = [{"limit_pct": p["limit"], "matmuls_per_s": round(p["matmuls_per_s"], 1),
               "achieved_pct": round(100 * p["matmuls_per_s"] / base, 1),
               "ok": abs(100 * p["matmuls_per_s"] / base - p["limit"]) <= 5} for p in res[1:-1]]
    return {"size": size, "graph": graph, "unlimited_matmuls_per_s": round(base, 1),
            "unlimited_before_after": [round(res[0]["matmuls_per_s"], 1),
                                       round(res[-1]["matmuls_per_s"], 1)],
            "points": points}


def bench_shared(r: Runner, alone: float) -> dict:
    start = time.monotonic() + 15.0
    a = r.start(4096, "-1:7", start_at=start, CUDA_DEVICE_SM_LIMIT="30")
    b = r.start(4096, "-1:7", start_at=start, CUDA_DEVICE_SM_LIMIT="70")
    ra, rb = r.results(a)[0], r.results(b)[0]
    out = {}
    for name, res, lim in (("30", ra, 30), ("70", rb, 70)):
        pct = 100 * res["matmuls_per_s"] / alone
        out[name] = {"matmuls_per_s": round(res["matmuls_per_s"], 1),
                     "achieved_pct": round(pct, 1), "ok": abs(pct - lim) <= 5,
                     "sharing_seen": res["sharing"]}
    return out


def bench_priority(r: Runner, alone: float) -> dict:
    start = time.monotonic() + 15.0
    high = r.start(4096, "-1:7", start_at=start, CUDA_TASK_PRIORITY="0")
    low = r.start(4096, "-1:7", start_at=start, CUDA_TASK_PRIORITY="1")
    rh, rl = r.results(high)[0], r.results(low)[0]
    keep = 100 * rh["matmuls_per_s"] / alone
    return {"high_matmuls_per_s": round(rh["matmuls_per_s"], 1), "high_keeps_pct": round(keep, 1),
            "ok": keep >= 90, "low_matmuls_per_s": round(rl["matmuls_per_s"], 1),
            "low_pct_of_alone": round(100 * rl["matmuls_per_s"] / alone, 1)}


def bench_overhead(r: Runner) -> dict:
    cc = shutil.which("cc") or shutil.which("gcc")
    exe = r.tmp / "bench_compute_launch"
    subprocess.run([cc, "-O2", "-std=c11", "-D_GNU_SOURCE", f"-I{REPO / 'libvgpu' / 'include'}",
                    str(Path(__file__).with_name("bench_compute_launch.c")), "-ldl", "-o",
                    str(exe)], check=True)

    def once(preload: bool) -> float:
        env = r.env()
        if not preload:
            env.pop("LD_PRELOAD")
        out = subprocess.run([str(exe), "200", "500"], env=env, capture_output=True, text=True,
                             check=True).stdout
        return float(out.split()[0].split("=")[1])

    plain, shim = [], []
    for _ in range(3):
        plain.append(once(False))
        shim.append(once(True))
    p, s = statistics.median(plain), statistics.median(shim)
    return {"plain_ns_per_launch": p, "libvgpu_ns_per_launch": s,
            "added_ns_per_launch": round(s - p, 1), "runs_plain": plain, "runs_libvgpu": shim,
            "ok": s - p <= 300}


def markdown(res: dict) -> str:
    lines = [f"Machine: {res['machine']}  ", f"Command: `{res['command']}`  ",
             f"Total time: {res['seconds']:.0f} s", "",
             "| workload | unlimited matmul/s | limit % | matmul/s | achieved % | within ±5 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for b in res["limits"]:
        name = f"{b['size']}² bf16" + (f" graph×{b['graph']}" if b["graph"] else " eager")
        for p in b["points"]:
            lines.append(f"| {name} | {b['unlimited_matmuls_per_s']} | {p['limit_pct']} | "
                         f"{p['matmuls_per_s']} | {p['achieved_pct']} | {p['ok']} |")
    sh = res["shared"]
    lines += ["", "| two containers (4096²) | achieved % of alone | within ±5 |",
              "| --- | --- | --- |"]
    for k in ("30", "70"):
        lines.append(f"| limit {k} | {sh[k]['achieved_pct']} | {sh[k]['ok']} |")
    pr = res["priority"]
    lines += ["", f"High priority sharing with low: keeps {pr['high_keeps_pct']} % of alone "
              f"(≥ 90: {pr['ok']}); low got {pr['low_pct_of_alone']} % of alone.", ""]
    ov = res["overhead"]
    lines.append(f"Empty-kernel cuLaunchKernel, no limit: {ov['plain_ns_per_launch']} ns plain, "
                 f"{ov['libvgpu_ns_per_launch']} ns with libvgpu: +{ov['added_ns_per_launch']} ns "
                 f"(≤ 300: {ov['ok']}).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker")
    w.add_argument("--size", type=int, required=True)
    w.add_argument("--phases", required=True, help="LIMIT:SECONDS,... (LIMIT -1: leave as is)")
    w.add_argument("--graph", type=int, default=0)
    w.add_argument("--start-at", type=float, default=0.0)
    ap.add_argument("--out", type=Path, default=Path("bench_compute_out"))
    ap.add_argument("--skip", default="", help="comma list of: limits,shared,priority,overhead")
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        return worker(args)
    skip = set(filter(None, args.skip.split(",")))
    t0 = time.monotonic()
    res: dict = {"machine": f"{platform.node()} {platform.machine()} ({_gpu_name()})",
                 "command": " ".join([Path(sys.executable).name, *sys.argv])}
    with tempfile.TemporaryDirectory(prefix="bench-compute-") as tmp:
        r = Runner(Path(tmp))
        res["limits"] = [] if "limits" in skip else [
            bench_limits(r, 4096, 0), bench_limits(r, 1024, 0), bench_limits(r, 1024, 20)]
        alone = res["limits"][0]["unlimited_matmuls_per_s"] if res["limits"] else 1.0
        res["shared"] = {} if "shared" in skip else bench_shared(r, alone)
        res["priority"] = {} if "priority" in skip else bench_priority(r, alone)
        res["overhead"] = {} if "overhead" in skip else bench_overhead(r)
    res["seconds"] = time.monotonic() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_compute.json").write_text(json.dumps(res, indent=2) + "\n")
    if not skip:
        (args.out / "bench_compute.md").write_text(markdown(res))
    print(json.dumps(res, indent=2))
    return 0


def _gpu_name() -> str:
    try:
        query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        out = subprocess.run(query, capture_output=True, text=True, timeout=20).stdout
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "no nvidia-smi"


if __name__ == "__main__":
    sys.exit(main())
