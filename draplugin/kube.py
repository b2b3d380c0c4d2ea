"""The DRA driver's door to the Kubernetes API: read a ResourceClaim, keep the node's
ResourceSlice as wanted. `Resources` is the small interface the driver uses (tests pass an
in-memory fake); `KubeResources` implements it with the `kubernetes` client's CustomObjectsApi
(resource.k8s.io/v1 needs no generated models), always as raw JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gpuwarden.kubeclient import api_client

__all__ = ["KubeResources", "Resources"]

GROUP, VERSION = "resource.k8s.io", "v1"


class Resources(Protocol):
    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_slice(self, name: str) -> dict[str, Any] | None: ...

    def put_slice(self, body: Mapping[str, Any], resource_version: str | None) -> None:
        """Create (resource_version None) or replace the slice."""
        ...


class KubeResources:
    def __init__(self, kubeconfig: str | None = None) -> None:
        from kubernetes import client

        self.objects = client.CustomObjectsApi(api_client(kubeconfig))

    @staticmethod
    def _missing(err: Exception) -> bool:
        return getattr(err, "status", None) == 404

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            out: Any = self.objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", name)
        except Exception as err:
            if self._missing(err):
                return None
            raise
        return dict(out)

    def get_slice(self, name: str) -> dict[str, Any] | None:
        try:
            out: Any = self.objects.get_cluster_custom_object(
                GROUP, VERSION, "resourceslices", name)
        except Exception as err:
            if self._missing(err):
                return None
            raise
        return dict(out)

    def put_slice(self, body: Mapping[str, Any], resource_version: str | None) -> None:
        body = dict(body)
        if resource_version is None:
            self.objects.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
        else:
            body["metadata"] = {**body["metadata"], "resourceVersion": resource_version}
            self.objects.replace_cluster_custom_object(GROUP, VERSION, "resourceslices",
                                                       body["metadata"]["name"], body)
