"""Benchmark: the device plugin's Allocate latency for a 4-container pod, and how soon a GPU's
health change reaches a ListAndWatch stream.

Both over real gRPC on unix sockets, the way the kubelet calls the plugin (tests/deviceplugin's
stand-in kubelet). The pods come from an in-memory cluster by default, or, with
--kubeconfig, from a real API server (pods created there, bound to a node name without a
kubelet, so the plugin lists and annotates them for real; the test bed's control plane works:
`--testbed` starts one).

    .venv/bin/python tests/benchmarks/bench_deviceplugin.py [--pods 300] [--testbed]

Allocate: one AllocateRequest with 4 container requests (one slice each, on 2 GPUs) per pod,
each pod fresh (assignment annotated, bind-phase allocating); the plugin lists the node's pods,
matches, writes 4 regions and patches the pod. ListAndWatch: a GPU's health is flipped in the
inventory, the plugin's health loop polls it (every 10 ms here; 5 s by default, or NVML's XID
event at once on a real driver) and the stream delivers the new list; measured from the flip.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "deviceplugin"))

from standin import (  # noqa: E402
    UUIDS,
    FakeCluster,
    ListAndWatchReader,
    StandinKubelet,
    assigned_pod,
    short_dir,
    two_gpus,
)

from deviceplugin.api import device_plugin  # noqa: E402
from deviceplugin.kube import KubeCluster  # noqa: E402
from deviceplugin.server import DevicePlugin, PluginOptions  # noqa: E402
from gpuwarden.config import Settings  # noqa: E402
from gpuwarden.resources import ResourceNames  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def ms(x: float) -> str:
    return f"{x * 1000:.2f} ms"


def make_pod_manifest(i: int, node: str) -> dict[str, Any]:
    pod = assigned_pod(f"bench-{i}", [(f"c{k}", [(UUIDS[k % 2], 1000, 25)]) for k in range(4)],
                       node=node, created=1000.0 + i)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "annotations": dict(pod.annotations)},
            "spec": {"nodeName": node, "containers": [
                {"name": c.name, "image": "none", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                for c in pod.containers]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=300)
    ap.add_argument("--health-flips", type=int, default=50)
    ap.add_argument("--kubeconfig", default=None, help="a real API server (pods go there)")
    ap.add_argument("--testbed", action="store_true", help="start the test bed's control plane")
    args = ap.parse_args()

    cp = None
    if args.testbed:
        from testbed import ControlPlane

        cp = ControlPlane.start()
        args.kubeconfig = str(cp.admin_kubeconfig)
    d = short_dir("gwbench-")
    try:
        plugin_dir = d / "dp"
        plugin_dir.mkdir()
        settings = Settings(region_root=str(d / "regions"))
        kubelet = StandinKubelet(plugin_dir).start()
        inventory = two_gpus()
        node = "bench-node"
        cluster: Any = FakeCluster()
        namespace = "default"
        if args.kubeconfig:
            from kubernetes import client

            cluster = KubeCluster(ResourceNames(), args.kubeconfig)
            namespace = f"bench-{os.getpid()}"
            cluster.core.create_namespace({"metadata": {"name": namespace}})
            from testbed.kube import add_fake_node

            if cp is not None:
                add_fake_node(client.ApiClient(), node, {"nvidia.com/gpu": "20"})
        opts = PluginOptions(node=node, plugin_dir=plugin_dir, libvgpu="/opt/libvgpu.so",
                             health_seconds=0.01, watch_seconds=0.1, maintenance_seconds=3600)
        plugin = DevicePlugin(settings, opts, inventory, cluster, None,
                              log=lambda _m: None).start()
        _, stub = kubelet.dial(opts.socket_name)
        pb = device_plugin().pb

        lat: list[float] = []
        for i in range(args.pods):
            if args.kubeconfig:
                cluster.core.create_namespaced_pod(namespace, make_pod_manifest(i, node))
            else:
                cluster.add(assigned_pod(
                    f"bench-{i}", [(f"c{k}", [(UUIDS[k % 2], 1000, 25)]) for k in range(4)],
                    node=node, created=1000.0 + i))
            req = pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=[f"{UUIDS[k % 2]}::{k // 2}"])
                for k in range(4)])
            t0 = time.perf_counter()
            resp = stub.Allocate(req, timeout=10)
            lat.append(time.perf_counter() - t0)
            assert len(resp.container_responses) == 4
            for folder in (d / "regions").glob("uid-*"):
                shutil.rmtree(folder)  # keep the folder small: regions of earlier pods
        watch = ListAndWatchReader(stub)
        watch.wait(lambda r: len(r.devices) == 20)
        health: list[float] = []
        for i in range(args.health_flips):
            healthy = i % 2 == 1
            t0 = time.monotonic()
            inventory.set_health(UUIDS[1], healthy)
            at, _ = watch.wait(lambda r, h=healthy: all(
                (dv.health == "Healthy") == h for dv in r.devices if dv.ID.startswith(UUIDS[1])))
            health.append(at - t0)
        watch.cancel()
        plugin.stop()
        kubelet.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
        if cp is not None:
            cp.stop()

    where = "a real API server (test bed)" if args.kubeconfig else "an in-memory cluster"
    print(f"machine: {platform.node()} ({os.cpu_count()} CPUs), Python "
          f"{platform.python_version()}, pods from {where}")
    print(f"Allocate, 4-container pod, {len(lat)} pods: median {ms(statistics.median(lat))}, "
          f"p90 {ms(pct(lat, 90))}, p99 {ms(pct(lat, 99))}, max {ms(max(lat))}")
    print(f"ListAndWatch update after a health change, {len(health)} flips (poll every "
          f"10 ms): median {ms(statistics.median(health))}, p99 {ms(pct(health, 99))}, "
          f"max {ms(max(health))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
