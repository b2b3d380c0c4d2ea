"""Runner of bench_shim.c: builds it, then runs it alternately without and with
LD_PRELOAD=libvgpu.so (with a memory limit and a region, so admission is on the measured path; no
compute limit), several rounds, and prints the medians and the difference side by side as
markdown (and JSON with --json).

    python3 tests/benchmarks/bench_shim.py --sim        # this machine, on the simulated GPU
    python3 tests/benchmarks/bench_shim.py              # a real GPU (the system's libcuda)

Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(out: Path) -> Path:
    exe = out / "bench_shim"
    subprocess.run(
        [
            "cc",
            "-std=c11",
            "-D_GNU_SOURCE",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{REPO / 'libvgpu' / 'include'}",
            str(Path(__file__).with_suffix(".c")),
            "-o",
            str(exe),
            "-ldl",
        ],
        check=True,
    )
    return exe


def run(exe: Path, env: dict[str, str], launches: int, pairs: int) -> dict[str, float]:
    res = subprocess.run(
        [str(exe), str(launches), str(pairs)], env=env, capture_output=True, text=True, timeout=300
    )
    if res.returncode != 0:
        sys.exit(f"bench_shim failed ({res.returncode}): {res.stderr}")
    return json.loads(res.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", action="store_true", help="run on the simulated GPU")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=100000)
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--shim", type=Path, default=REPO / "libvgpu" / "build" / "libvgpu.so")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.shim.exists():
        sys.exit(f"--shim {args.shim} does not exist; run `make -C libvgpu` first")
    tmp = Path(tempfile.mkdtemp(prefix="bench_shim."))
    exe = build(tmp)
    base = dict(os.environ)
    for var in (
        "LD_PRELOAD",
        "CUDA_DEVICE_MEMORY_LIMIT",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE",
        "CUDA_DEVICE_SM_LIMIT",
    ):
        base.pop(var, None)
    if args.sim:
        base["LD_LIBRARY_PATH"] = str(REPO / "libvgpu" / "build" / "sim")
        base["GPUWARDEN_SIM_STATE"] = str(tmp / "sim.state")
        base["GPUWARDEN_SIM_KERNEL_SCALE"] = "0.001"
    shim = {
        **base,
        "LD_PRELOAD": str(args.shim.resolve()),
        "CUDA_DEVICE_MEMORY_LIMIT": "3000m",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(tmp / "region"),
    }
    results: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    for _ in range(args.rounds):
        results["without"].append(run(exe, base, args.launches, args.pairs))
        results["with"].append(run(exe, shim, args.launches, args.pairs))
    summary = {}
    for key in ("launch_ns", "alloc_free_ns"):
        a = statistics.median(r[key] for r in results["without"])
        b = statistics.median(r[key] for r in results["with"])
        summary[key] = {"without": a, "with": b, "added": b - a}
    if args.json:
        print(json.dumps({"rounds": results, "summary": summary}))
        return 0
    print(
        f"machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f"{'simulated GPU' if args.sim else 'real GPU'}; {args.rounds} interleaved rounds, "
        f"medians; {args.launches} launches, {args.pairs} pairs per round"
    )
    print("| per call | without shim | with shim | added |")
    print("| --- | --- | --- | --- |")
    for key, label in (
        ("launch_ns", "cuLaunchKernel (empty kernel)"),
        ("alloc_free_ns", "cuMemAlloc_v2 + cuMemFree_v2 (1 MiB)"),
    ):
        s = summary[key]
        print(
            f"| {label} | {s['without'] / 1000:.3f} µs | {s['with'] / 1000:.3f} µs | "
            f"{s['added'] / 1000:+.3f} µs |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
