"""Benchmark: how fast the Kubernetes test bed starts, runs a pod and stops.

Targets (the test-bed brief, on the 2-core development machine): control plane ready in ~4 s,
a Ready node ~6 s later.  Each round starts a fresh control plane (etcd, kube-apiserver,
kube-scheduler, kube-controller-manager) and a node (containerd 2, images imported, kubelet,
Ready and untainted), creates a busybox pod and waits for it to be Running and for one that
exits to be Succeeded, then stops the node and the control plane.  Needs root and
KUBEBUILDER_ASSETS (scripts/test.sh sets it; or .cache/k8s/v1.36.2).

    sudo KUBEBUILDER_ASSETS=$PWD/.cache/k8s/v1.36.2 .venv/bin/python \
        tests/benchmarks/bench_testbed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed import ControlPlane, Node, images
from testbed.kube import core, create_namespace, pod_manifest, wait_pod_phase


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def one_round() -> dict[str, float]:
    out: dict[str, float] = {}
    out["control plane ready"], cp = timed(ControlPlane.start)
    assert isinstance(cp, ControlPlane)
    try:
        out["node Ready"], node = timed(lambda: Node.start(cp))
        assert isinstance(node, Node)
        out.update({f"  {k}": v for k, v in node.startup_seconds.items()})
        try:
            api = node.api
            ns = create_namespace(api)
            v1 = core(api)

            def run(name: str, command: list[str], phases: tuple[str, ...]) -> None:
                v1.create_namespaced_pod(ns, pod_manifest(name, images.BUSYBOX_IMAGE, command,
                                                          node_name=node.name))
                wait_pod_phase(api, ns, name, phases, timeout=60)

            out["pod create -> Running"], _ = timed(
                lambda: run("sleeper", ["sleep", "600"], ("Running",)))
            out["pod create -> Succeeded"], _ = timed(
                lambda: run("once", ["true"], ("Succeeded",)))
            out["kubelet restart -> Ready"], _ = timed(node.restart_kubelet)
        finally:
            out["node stop"], _ = timed(node.stop)
    finally:
        out["control plane stop"], _ = timed(cp.stop)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rounds = [one_round() for _ in range(args.rounds)]
    print(f"# {platform.node()}: {os.cpu_count()} CPUs, {args.rounds} rounds "
          f"(seconds: median / min / max)")
    for key in rounds[0]:
        vals = [r[key] for r in rounds]
        print(f"{key:28s} {statistics.median(vals):6.2f} {min(vals):6.2f} {max(vals):6.2f}")


if __name__ == "__main__":
    main()
