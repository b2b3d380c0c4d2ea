"""An in-memory ClusterApi for extender tests: Nodes and Pods as dicts with resourceVersions,
the resourceVersion precondition of the real API server (409), bindings recorded."""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from extender.kube import ApiError, Conflict
from gpuwarden.annotations import GpuDevice, NodeInventory, encode_node_gpus
from gpuwarden.informer import Listed


class _Kind:
    def __init__(self, store: dict[str, dict[str, Any]], lock: threading.Lock) -> None:
        self.store, self.lock = store, lock

    def list(self) -> Listed:
        with self.lock:
            return Listed(copy.deepcopy(list(self.store.values())), "1")

    def watch(self, resource_version: str, timeout_s: int) -> Iterable[Mapping[str, Any]]:
        return []


class FakeCluster:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rv = itertools.count(100)
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.bindings: list[tuple[str, str]] = []
        self.fail_bind: str | None = None

    # ---- building the cluster
    def add_node(self, name: str, *mibs: int, split: int = 10,
                 labels: Mapping[str, str] | None = None) -> None:
        inv = NodeInventory(tuple(GpuDevice(f"GPU-{name}-{i}", i, m, 100, "NVIDIA H200")
                                  for i, m in enumerate(mibs)), split)
        self.nodes[name] = {"metadata": {"name": name, "resourceVersion": str(next(self.rv)),
                                         "labels": dict(labels or {}),
                                         "annotations": {"gpuwarden.io/node-gpus":
                                                         encode_node_gpus(inv)}}}

    def add_pod(self, name: str, limits: Mapping[str, int], namespace: str = "default",
                annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        pod = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                            "resourceVersion": str(next(self.rv)),
                            "annotations": dict(annotations or {})},
               "spec": {"containers": [{"name": "main", "resources": {"limits": {
                   f"nvidia.com/{k}": v for k, v in limits.items()}}}]},
               "status": {"phase": "Pending"}}
        self.pods[f"{namespace}/{name}"] = pod
        return copy.deepcopy(pod)

    # ---- ClusterApi
    def node_watch(self) -> _Kind:
        return _Kind(self.nodes, self.lock)

    def pod_watch(self) -> _Kind:
        return _Kind(self.pods, self.lock)

    def read_node(self, name: str) -> dict[str, Any]:
        with self.lock:
            if name not in self.nodes:
                raise ApiError(404, f'nodes "{name}" not found')
            return copy.deepcopy(self.nodes[name])

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None],
                               resource_version: str) -> dict[str, Any]:
        with self.lock:
            node = self.nodes[name]
            if node["metadata"]["resourceVersion"] != resource_version:
                raise Conflict(409, "the object has been modified")
            _merge(node, annotations)
            node["metadata"]["resourceVersion"] = str(next(self.rv))
            return copy.deepcopy(node)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.pods[f"{namespace}/{name}"])

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: Mapping[str, str | None]) -> dict[str, Any]:
        with self.lock:
            pod = self.pods[f"{namespace}/{name}"]
            _merge(pod, annotations)
            pod["metadata"]["resourceVersion"] = str(next(self.rv))
            return copy.deepcopy(pod)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        if self.fail_bind:
            raise ApiError(500, self.fail_bind)
        with self.lock:
            self.pods[f"{namespace}/{name}"]["spec"]["nodeName"] = node
            self.bindings.append((f"{namespace}/{name}", node))


def _merge(obj: dict[str, Any], annotations: Mapping[str, str | None]) -> None:
    ann = obj["metadata"].setdefault("annotations", {})
    for k, v in annotations.items():
        if v is None:
            ann.pop(k, None)
        else:
            ann[k] = v
