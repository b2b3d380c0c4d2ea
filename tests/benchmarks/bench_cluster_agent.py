"""What cluster mode adds to the agent's loop (not collected by pytest).

    .venv/bin/python tests/benchmarks/bench_cluster_agent.py [--pods 110] [--rounds 50]

1. `desired()`: the node's pods (a full node: 110 pods, 2 containers each, one asking for a GPU)
   read into GPU-container workloads, as the agent does on every pod change and every 2 s;
2. `scan()`: this machine's /proc walked for processes in pod containers, cold (every cgroup file
   read) and warm (only start times read, cgroups cached), as the agent does every 2 s;
3. `container()` for one process, cache hit (a GPU process the eBPF or NVML view names).

Prints a Markdown block for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent.cluster import ClusterMode  # noqa: E402
from gpuwarden.informer import Informer, Listed  # noqa: E402


def pods(n: int) -> list[dict]:
    out = []
    for i in range(n):
        uid = f"00000000-0000-4000-8000-{i:012d}"
        out.append({
            "metadata": {"uid": uid, "name": f"p{i}", "namespace": f"team-{i % 7}",
                         "labels": {"app": f"a{i}", "team": "vision"},
                         "annotations": {"example.com/owner": "x"}, "resourceVersion": "1"},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpumem": "3k",
                                                          "nvidia.com/gpucores": "30"}}},
                {"name": "sidecar"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": c, "containerID": f"containerd://{i:064x}", "state": {"running": {}}}
                for c in ("main", "sidecar")]}})
    return out


class Fixed:
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def list(self) -> Listed:
        return Listed(self.items, "1")

    def watch(self, rv: str, timeout_s: int) -> list[dict]:
        return []


def timed(fn, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=110)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    pod_inf = Informer("pods", Fixed(pods(args.pods)))
    node_inf = Informer("node", Fixed([{"metadata": {"name": "n1", "labels": {"gpu": "h200"},
                                                     "resourceVersion": "1"}}]))
    pod_inf.relist()
    node_inf.relist()
    cm = ClusterMode(pod_inf, node_inf, "n1", "/var/lib/gpuwarden/containers")
    assert len(cm.desired()) == args.pods
    desired = timed(cm.desired, args.rounds)
    nproc = sum(1 for n in os.listdir("/proc") if n.isdigit())
    cold = []
    for _ in range(5):
        cm._refs.clear()
        cold += timed(lambda: cm.scan({}), 1)
    warm = timed(lambda: cm.scan({}), args.rounds)
    me = os.getpid()
    cm.container(me)
    hit = timed(lambda: cm.container(me), 1000)
    med = statistics.median
    print(f"Cluster mode, {platform.node()} ({os.cpu_count()} cores), "
          f"`python3 tests/benchmarks/bench_cluster_agent.py --pods {args.pods}`:\n")
    print("| step | median | max |")
    print("| --- | --- | --- |")
    print(f"| desired(): {args.pods} pods -> GPU containers | {med(desired) * 1e3:.2f} ms | "
          f"{max(desired) * 1e3:.2f} ms |")
    print(f"| scan(): {nproc} processes, cold | {med(cold) * 1e3:.2f} ms | "
          f"{max(cold) * 1e3:.2f} ms |")
    print(f"| scan(): {nproc} processes, warm | {med(warm) * 1e3:.2f} ms | "
          f"{max(warm) * 1e3:.2f} ms |")
    print(f"| container(): one process, cached | {med(hit) * 1e6:.1f} us | "
          f"{max(hit) * 1e6:.1f} us |")
    every2s = (med(desired) + med(warm)) / 2.0
    print(f"\nBoth every 2 s: {every2s * 100:.2f} % of one core.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
