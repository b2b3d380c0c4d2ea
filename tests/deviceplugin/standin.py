"""A stand-in kubelet that speaks the real gRPC protocol over unix sockets (its own Registration
server on kubelet.sock and, optionally, PodResources), and dials the plugin as the kubelet does;
plus in-memory fakes of the plugin's other edges (the cluster, the GPUs)."""

from __future__ import annotations

import contextlib
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from deviceplugin.allocation import ContainerSpec, PodView
from deviceplugin.api import device_plugin, pod_resources
from deviceplugin.devices import PhysicalGpu
from gpuwarden.annotations import (
    BIND_PHASE,
    ContainerAssignment,
    DeviceGrant,
    PodAssignment,
    assignment_annotations,
)

if TYPE_CHECKING:
    from deviceplugin.server import DevicePlugin

UUIDS = ("GPU-00000000-0000-0000-0000-0000000000a0", "GPU-00000000-0000-0000-0000-0000000000a1")


def short_dir(prefix: str = "gwdp-") -> Path:
    """A folder with a short path: unix socket paths are limited to 107 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class FakeInventory:
    def __init__(self, gpus: Sequence[PhysicalGpu]) -> None:
        self.gpus = tuple(gpus)
        self.reads = 0

    def read(self) -> tuple[PhysicalGpu, ...]:
        self.reads += 1
        return self.gpus

    def wait_xid(self, timeout_ms: int) -> bool:
        return False

    def set_health(self, uuid: str, healthy: bool) -> None:
        self.gpus = tuple(replace(g, healthy=healthy, why_unhealthy="" if healthy else "XID 79")
                          if g.uuid == uuid else g for g in self.gpus)


def two_gpus() -> FakeInventory:
    return FakeInventory([PhysicalGpu(UUIDS[0], 0, 81920, "NVIDIA H200", 0),
                          PhysicalGpu(UUIDS[1], 1, 81920, "NVIDIA H200", 1)])


@dataclass
class FakeCluster:
    pods: dict[str, PodView] = field(default_factory=dict)  # uid -> pod
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    fail_pod_patch: str = ""  # error message for annotate_pod, when set
    lists: int = 0
    fresh_lists: int = 0
    # a watch cache that lags: what pods_on_node(fresh=False) returns, when set
    cache: dict[str, PodView] | None = None

    def add(self, pod: PodView) -> PodView:
        self.pods[pod.uid] = pod
        return pod

    def pods_on_node(self, node: str, fresh: bool = False) -> list[PodView]:
        self.lists += 1
        self.fresh_lists += fresh
        pods = self.pods if fresh or self.cache is None else self.cache
        return [p for p in pods.values() if p.node == node]

    def pod(self, name: str) -> PodView:
        return next(p for p in self.pods.values() if p.name == name)

    def annotate_pod(self, namespace: str, name: str,
                     annotations: Mapping[str, str | None]) -> None:
        if self.fail_pod_patch:
            raise RuntimeError(self.fail_pod_patch)
        p = next(p for p in self.pods.values() if (p.namespace, p.name) == (namespace, name))
        merged = {k: v for k, v in {**p.annotations, **annotations}.items() if v is not None}
        self.pods[p.uid] = replace(p, annotations=merged)

    def annotate_node(self, node: str, annotations: Mapping[str, str | None]) -> None:
        n = self.nodes.setdefault(node, {})
        n.update({k: v for k, v in annotations.items() if v is not None})


def assigned_pod(name: str, containers: Sequence[tuple[str, Sequence[tuple[str, int, int]]]],
                 node: str = "node-a", created: float = 100.0, namespace: str = "team",
                 priority: int = 1, extra: Mapping[str, str] | None = None) -> PodView:
    """A pod the extender bound: containers [(name, [(uuid, memory MiB, cores), ...])]."""
    assignment = PodAssignment(node=node, containers=tuple(
        ContainerAssignment(name=c, devices=tuple(DeviceGrant(u, UUIDS.index(u), m, k)
                                                  for u, m, k in devs), priority=priority)
        for c, devs in containers))
    ann = assignment_annotations(assignment, "allocating", int(created))
    return PodView(namespace=namespace, name=name, uid=f"uid-{name}", node=node,
                   annotations={**ann, **(extra or {})},
                   containers=tuple(ContainerSpec(c, gpus=len(d), other_gpu_resources=True)
                                    for c, d in containers),
                   created=created)


def plain_pod(name: str, gpus: int, node: str = "node-a", created: float = 50.0,
              env: Mapping[str, str] | None = None) -> PodView:
    """A pod no extender saw: it asks only for nvidia.com/gpu."""
    return PodView(namespace="default", name=name, uid=f"uid-{name}", node=node,
                   containers=(ContainerSpec("main", gpus=gpus, env=dict(env or {})),),
                   created=created)


# ---- the kubelet -------------------------------------------------------------------------------

class StandinKubelet:
    """Serves Registration on <dir>/kubelet.sock. On Register it checks, as the kubelet does,
    that the plugin is already serving (GetDevicePluginOptions on its endpoint)."""

    def __init__(self, plugin_dir: Path) -> None:
        self.dir = plugin_dir
        self.sock = plugin_dir / "kubelet.sock"
        self.registrations: queue.Queue[tuple[float, Any, Any]] = queue.Queue()
        self.server: grpc.Server | None = None

    def start(self) -> StandinKubelet:
        api = device_plugin()
        outer = self

        class Registration(api.grpc.RegistrationServicer):
            def Register(self, request: Any, context: Any) -> Any:
                with grpc.insecure_channel(f"unix://{outer.dir / request.endpoint}") as ch:
                    opts = api.grpc.DevicePluginStub(ch).GetDevicePluginOptions(
                        api.pb.Empty(), timeout=2)
                outer.registrations.put((time.monotonic(), request, opts))
                return api.pb.Empty()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        api.grpc.add_RegistrationServicer_to_server(Registration(), self.server)
        self.server.add_insecure_port(f"unix://{self.sock}")
        self.server.start()
        return self

    def stop(self, delete_plugin_sockets: bool = False) -> None:
        if self.server is not None:
            self.server.stop(0).wait()
        with contextlib.suppress(FileNotFoundError):
            self.sock.unlink()
        if delete_plugin_sockets:  # a new kubelet deletes every plugin's socket
            for p in self.dir.glob("*.sock"):
                p.unlink()

    def next_registration(self, timeout: float = 5.0) -> tuple[float, Any, Any]:
        return self.registrations.get(timeout=timeout)

    def dial(self, endpoint: str) -> tuple[grpc.Channel, Any]:
        ch = grpc.insecure_channel(f"unix://{self.dir / endpoint}")
        return ch, device_plugin().grpc.DevicePluginStub(ch)


class ListAndWatchReader:
    """Reads a ListAndWatch stream in a thread; `wait(pred)` waits for a matching response."""

    def __init__(self, stub: Any) -> None:
        self.stream = stub.ListAndWatch(device_plugin().pb.Empty())
        self.responses: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(grpc.RpcError):
            for resp in self.stream:
                self.responses.put((time.monotonic(), resp))

    def wait(self, pred: Callable[[Any], bool], timeout: float = 5.0) -> tuple[float, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching ListAndWatch response in {timeout}s")
            try:
                at, resp = self.responses.get(timeout=left)
            except queue.Empty:
                continue
            if pred(resp):
                return at, resp

    def cancel(self) -> None:
        self.stream.cancel()


class StandinPodResources:
    """The kubelet's PodResources List, serving what the test says each container holds."""

    def __init__(self, sock: Path, resource: str = "nvidia.com/gpu") -> None:
        self.sock, self.resource = sock, resource
        self.holdings: list[tuple[str, str, str, list[str]]] = []  # ns, pod, container, ids
        api = pod_resources()
        outer = self

        class Lister(api.grpc.PodResourcesListerServicer):
            def List(self, request: Any, context: Any) -> Any:
                pb = api.pb
                pods = [pb.PodResources(name=p, namespace=ns, containers=[
                    pb.ContainerResources(name=c, devices=[pb.ContainerDevices(
                        resource_name=outer.resource, device_ids=ids)])])
                    for ns, p, c, ids in outer.holdings]
                return pb.ListPodResourcesResponse(pod_resources=pods)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api.grpc.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        self.server.add_insecure_port(f"unix://{sock}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(0).wait()


def bind_phase(cluster: FakeCluster, name: str) -> str | None:
    return cluster.pod(name).annotations.get(BIND_PHASE)


@dataclass
class Bed:
    """A device plugin beside a stand-in kubelet (the make_bed fixture's): here, not in the
    conftest, so that a test imports it by a name no other folder's conftest also has."""

    dir: Path
    kubelet: StandinKubelet
    plugin: DevicePlugin
    cluster: FakeCluster
    inventory: FakeInventory
    stub: Any  # DevicePluginStub dialled by the stand-in kubelet
    regions: Path
