"""Compute-limiter benchmark on the simulated GPU (CI machines, no GPU): the same questions as
bench_compute.py, answered with tests/compute/progs/launch_loop.c on libvgpu/build/sim.

    make -C libvgpu && .venv/bin/python tests/benchmarks/bench_compute_sim.py

Prints a markdown report (the `## libvgpu compute` numbers of docs/benchmarks.md).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from libvgpu.paths import shim_path, sim_lib_dir  # noqa: E402


def build(tmp: Path, src: Path) -> Path:
    exe = tmp / src.stem
    subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-I{REPO / 'libvgpu/include'}",
                    str(src), "-ldl", "-o", str(exe)], check=True)
    return exe


def env(tmp: Path, name: str, preload: bool = True, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("CUDA_", "GPU_CORE", "GPUWARDEN_", "LD_PRELOAD"))}
    e.update(LD_LIBRARY_PATH=str(sim_lib_dir()), GPUWARDEN_SIM_STATE=str(tmp / f"{name}.sim"),
             GPUWARDEN_NODE_REGION=str(tmp / f"{name}.node"))
    if preload:
        e["LD_PRELOAD"] = str(shim_path())
    e.update(extra)
    return e


def loop(exe: Path, e: dict[str, str], grid: int, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen([str(exe), "kernel", str(grid), str(seconds)], env=e, text=True,
                            stdout=subprocess.PIPE)


def share(p: subprocess.Popen[str]) -> float:
    out, _ = p.communicate(timeout=120)
    return float(dict(w.split("=") for w in out.split())["share"])


def main() -> int:
    t0 = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ll = build(tmp, REPO / "tests/compute/progs/launch_loop.c")
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
        prio = env(tmp, "prio")
        h = loop(ll, dict(prio, CUDA_TASK_PRIORITY="0",
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "h.region")), 1000, 4.0)
        lo = loop(ll, dict(prio, CUDA_TASK_PRIORITY="1",
                           CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / "l.region")), 1000, 4.0)
        sh, sl = share(h), share(lo)
        plain, shim = [], []
        for i in range(5):
            for preload, acc in ((False, plain), (True, shim)):
                e = env(tmp, f"o{i}{preload}", preload, GPUWARDEN_SIM_KERNEL_SCALE="0.001")
                out = subprocess.run([str(bl), "200", "500"], env=e, capture_output=True,
                                     text=True, check=True).stdout
                acc.append(float(out.split()[0].split("=")[1]))
    print(f"Machine: {platform.node()} ({os.cpu_count()} cores), simulated GPU  ")
    print("Command: `.venv/bin/python tests/benchmarks/bench_compute_sim.py`  ")
    print(f"Total time: {time.monotonic() - t0:.0f} s\n")
    print("| workload | unlimited share | limit % | achieved share % | within ±5 |")
    print("| --- | --- | --- | --- | --- |")
    for label, base, lim, s in rows:
        print(f"| {label} | {100 * base:.1f} | {lim} | {100 * s:.1f} | {abs(100 * s - lim) <= 5} |")
    print(f"\nTwo low-priority containers sharing (1 ms kernels): limit 30 got {100 * sa:.1f} %, "
          f"limit 70 got {100 * sb:.1f} % (alone, unlimited: {100 * alone:.1f} %).  ")
    print(f"High priority sharing with low priority: high {100 * sh:.1f} % "
          f"({100 * sh / alone:.1f} % of alone), low {100 * sl:.1f} %.  ")
    p, s = statistics.median(plain), statistics.median(shim)
    print(f"No-limit launch cost (sim cuLaunchKernel, 5 alternated runs, median of medians): "
          f"{p:.0f} ns plain, {s:.0f} ns with libvgpu, +{s - p:.0f} ns.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
