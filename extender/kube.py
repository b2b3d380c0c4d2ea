"""The Kubernetes API edge of the extender: list/watch of Nodes and Pods as plain dicts, the
resourceVersion-guarded patch of a Node's annotations, pod annotations, pods/binding, Events.

Everything else in extender/ talks to the small `ClusterApi` protocol, which tests fake.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from gpuwarden.informer import ClientListWatch, ListWatch
from gpuwarden.kubeclient import api_client

__all__ = ["ApiError", "ClusterApi", "Conflict", "KubeClusterApi"]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Conflict(ApiError):
    """The object changed since the resourceVersion given (HTTP 409)."""


class ClusterApi(Protocol):
    def node_watch(self) -> ListWatch: ...

    def pod_watch(self) -> ListWatch: ...

    def read_node(self, name: str) -> dict[str, Any]: ...

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None],
                               resource_version: str) -> dict[str, Any]:
        """Merge the annotations (None deletes) only if the Node is still at
        `resource_version`; raises Conflict otherwise. Returns the updated Node."""
        ...

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]: ...

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: Mapping[str, str | None]) -> dict[str, Any]: ...

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None: ...


def _error(err: Any) -> ApiError:
    status = int(getattr(err, "status", 0) or 0)
    body = getattr(err, "body", None) or str(err)
    try:
        message = json.loads(body).get("message", body)
    except (ValueError, AttributeError, TypeError):
        message = body
    return (Conflict if status == 409 else ApiError)(status, str(message))


class KubeClusterApi:
    """`ClusterApi` over the official kubernetes client (kubeconfig or in-cluster config)."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        from kubernetes import client

        self.api = api = api_client(kubeconfig)
        self.core = client.CoreV1Api(api)

    def node_watch(self) -> ListWatch:
        return ClientListWatch(self.core.list_node, _error)

    def pod_watch(self) -> ListWatch:
        return ClientListWatch(self.core.list_pod_for_all_namespaces, _error)

    def _call(self, fn: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(*args, _preload_content=False, **kw)
        except ApiException as err:
            raise _error(err) from None
        data = resp.data
        return json.loads(data) if data else {}

    def read_node(self, name: str) -> dict[str, Any]:
        return self._call(self.core.read_node, name)

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None],
                               resource_version: str) -> dict[str, Any]:
        body = {"metadata": {"resourceVersion": resource_version,
                             "annotations": dict(annotations)}}
        return self._call(self.core.patch_node, name, body)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(self.core.read_namespaced_pod, name, namespace)

    def patch_pod_annotations(self, namespace: str, name: str,
                              annotations: Mapping[str, str | None]) -> dict[str, Any]:
        return self._call(self.core.patch_namespaced_pod, name, namespace,
                          {"metadata": {"annotations": dict(annotations)}})

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        from kubernetes import client

        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node))
        self._call(self.core.create_namespaced_pod_binding, name, namespace, body)
