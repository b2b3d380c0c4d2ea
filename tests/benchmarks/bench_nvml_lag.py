"""How NVML's GPU utilisation follows a load step, on a real GPU (no libvgpu).

libvgpu's busy feedback (libvgpu/src/clock.c) compares NVML's utilisation with the GPU time it
charged over a window; it waits FEEDBACK_SETTLE_NS after a start or a limit change because the
utilisation averages over the driver's own sample period.  This measures that period: an idle
GPU, then bf16 matmuls back to back, then idle again, while nvmlDeviceGetUtilizationRates is read
every 5 ms.  Prints one JSON line per step: when the reading first changed, reached 50 % and 90 %
of the step (rising) or fell under 50 % and 10 % (falling), and how often it changes at all.

    python3 tests/benchmarks/bench_nvml_lag.py [--size 4096] [--seconds 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import threading
import time


def sample(handle, stop: threading.Event, out: list[tuple[float, int]]) -> None:
    import pynvml

    while not stop.is_set():
        out.append((time.monotonic(), pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        time.sleep(0.005)


def crossing(trace: list[tuple[float, int]], t0: float, test) -> float | None:
    for t, u in trace:
        if t >= t0 and test(u):
            return round(1e3 * (t - t0), 1)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import pynvml
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    trace: list[tuple[float, int]] = []
    stop = threading.Event()
    th = threading.Thread(target=sample, args=(handle, stop, trace), daemon=True)
    th.start()
    rows = []
    for _ in range(args.repeat):
        time.sleep(args.seconds)  # idle
        on = time.monotonic()
        while time.monotonic() < on + args.seconds:
            for _ in range(8):
                a @ a
            torch.cuda.synchronize()
        off = time.monotonic()
        rows.append({"step": "rise", "first_change_ms": crossing(trace, on, lambda u: u > 0),
                     "reached_50_ms": crossing(trace, on, lambda u: u >= 50),
                     "reached_90_ms": crossing(trace, on, lambda u: u >= 90)})
        time.sleep(args.seconds)
        rows.append({"step": "fall", "first_change_ms": crossing(trace, off, lambda u: u < 100),
                     "under_50_ms": crossing(trace, off, lambda u: u < 50),
                     "under_10_ms": crossing(trace, off, lambda u: u < 10)})
    stop.set()
    th.join()
    changes = [t for (t, u), (_, v) in itertools.pairwise(trace) if u != v]
    gaps = [round(1e3 * (b - a), 1) for a, b in itertools.pairwise(changes)]
    for r in rows:
        print(json.dumps(r))
    print(json.dumps({"readings": len(trace), "changes": len(changes),
                      "ms_between_changes_p50": statistics.median(gaps) if gaps else None,
                      "ms_between_changes_min": min(gaps) if gaps else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
