"""The Kubernetes API edge of the extender: list/watch of Nodes and Pods as plain dicts, the
resourceVersion-guarded patch of a Node's annotations, pod annotations, pods/binding, Events.

Everything else in extender/ talks to the small `ClusterApi` protocol, which tests fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from gpuwarden.informer import Gone, Listed, ListWatch

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


class _KindWatch:
    """List and watch one kind through a kubernetes-client list function, as dicts."""

    def __init__(self, list_fn: Any) -> None:
        self.list_fn = list_fn

    def list(self) -> Listed:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.list_fn(_preload_content=False, resource_version="0")
        except ApiException as err:
            raise _error(err) from None
        doc = json.loads(resp.data)
        return Listed(list(doc.get("items") or []),
                      str((doc.get("metadata") or {}).get("resourceVersion") or ""))

    def watch(self, resource_version: str, timeout_s: int) -> Iterator[Mapping[str, Any]]:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.list_fn(watch=True, resource_version=resource_version,
                                allow_watch_bookmarks=True, timeout_seconds=timeout_s,
                                _preload_content=False, _request_timeout=timeout_s + 30)
        except ApiException as err:
            if err.status == 410:
                raise Gone(str(err.reason)) from None
            raise _error(err) from None
        try:
            buf = b""
            for chunk in resp.stream(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


class KubeClusterApi:
    """`ClusterApi` over the official kubernetes client (kubeconfig or in-cluster config)."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        from kubernetes import client, config

        if kubeconfig:
            api = config.new_client_from_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
            api = client.ApiClient()
        self.api = api
        self.core = client.CoreV1Api(api)

    def node_watch(self) -> ListWatch:
        return _KindWatch(self.core.list_node)

    def pod_watch(self) -> ListWatch:
        return _KindWatch(self.core.list_pod_for_all_namespaces)

    def _call(self, fn: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        from kubernetes.client.rest import ApiException

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
