"""The device plugin's only door to the Kubernetes API: pods on this node, annotations on pods
and on the Node. `Cluster` is the small interface the servicer uses (tests pass an in-memory
fake); `KubeCluster` implements it with the `kubernetes` client: the node's pods from a watch
cache (gpuwarden.informer), or listed afresh when the caller needs what the API server has now,
always as raw JSON (no model deserialization on the Allocate path). `pod_view` turns a pod's JSON
into the plain data the pure core reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from deviceplugin.allocation import ContainerSpec, PodView
from gpuwarden.informer import ClientListWatch, Informer, stop_all
from gpuwarden.kubeclient import api_client
from gpuwarden.resources import ResourceNames

__all__ = ["Cluster", "KubeCluster", "pod_view"]


class Cluster(Protocol):
    def pods_on_node(self, node: str, fresh: bool = False) -> list[PodView]:
        """The pods bound to `node`: from a cache unless `fresh` (then as the API has them)."""
        ...

    def annotate_pod(self, namespace: str, name: str,
                     annotations: Mapping[str, str | None]) -> None: ...

    def annotate_node(self, node: str, annotations: Mapping[str, str | None]) -> None: ...


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _container(raw: Mapping[str, Any], init: bool, names: ResourceNames) -> ContainerSpec:
    res = raw.get("resources") or {}
    limits = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    others = (names.gpumem, names.gpumem_percentage, names.gpucores, names.priority)
    env = {str(e.get("name")): str(e.get("value", "")) for e in raw.get("env") or []
           if isinstance(e, dict) and "value" in e}
    return ContainerSpec(name=str(raw.get("name", "")), init=init,
                         gpus=_quantity(limits.get(names.gpu, 0)),
                         other_gpu_resources=any(k in limits for k in others), env=env)


def _timestamp(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def pod_view(raw: Mapping[str, Any], names: ResourceNames) -> PodView:
    """A pod's API JSON (camelCase keys) as a PodView."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    containers = tuple(_container(c, True, names) for c in spec.get("initContainers") or []) + \
        tuple(_container(c, False, names) for c in spec.get("containers") or [])
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    created = _timestamp(meta.get("creationTimestamp"))
    bind_time = annotations.get("hami.io/bind-time", "")
    if bind_time.isdigit():
        created = float(bind_time)
    return PodView(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                   uid=str(meta.get("uid", "")), node=str(spec.get("nodeName", "")),
                   annotations=annotations,
                   labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                   containers=containers, created=created,
                   phase=str((raw.get("status") or {}).get("phase", "")))


class KubeCluster:
    """Cluster over the `kubernetes` client (in-cluster config, or a kubeconfig file)."""

    def __init__(self, names: ResourceNames, kubeconfig: str | None = None) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client(kubeconfig))
        self.names = names
        self._informers: dict[str, Informer] = {}

    def _list_fn(self, node: str) -> Any:
        return partial(self.core.list_pod_for_all_namespaces,
                       field_selector=f"spec.nodeName={node}")

    def pods_on_node(self, node: str, fresh: bool = False) -> list[PodView]:
        inf = self._informers.get(node)
        if inf is None:
            inf = self._informers[node] = Informer(f"pods of {node}",
                                                   ClientListWatch(self._list_fn(node))).start()
        if fresh or not inf.synced.is_set():
            # a quorum read (no resourceVersion): what etcd has now, not the API server's cache
            resp: Any = self._list_fn(node)(_preload_content=False)
            items = json.loads(resp.data).get("items") or []
        else:
            items = inf.items()
        return [pod_view(p, self.names) for p in items]

    def annotate_pod(self, namespace: str, name: str,
                     annotations: Mapping[str, str | None]) -> None:
        self.core.patch_namespaced_pod(name, namespace,
                                       {"metadata": {"annotations": dict(annotations)}},
                                       _preload_content=False)

    def annotate_node(self, node: str, annotations: Mapping[str, str | None]) -> None:
        self.core.patch_node(node, {"metadata": {"annotations": dict(annotations)}},
                             _preload_content=False)

    def close(self) -> None:
        """Stop the informers and wait a little for their threads (Informer.stop)."""
        stop_all(self._informers.values(), wait_s=1.0)
