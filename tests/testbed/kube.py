"""Kubernetes API clients for tests on the test bed (the `kubernetes` Python client), and the
helpers they share: namespaces, ServiceAccount-token clients for RBAC tests, nodes without a
kubelet for scheduling tests, and reading what a finished pod's container said."""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from testbed.procs import wait_for

__all__ = ["ApiException", "add_fake_node", "api_client", "core", "create_namespace",
           "delete_namespace", "delete_node", "pod_manifest", "pod_output",
           "remove_not_ready_taint", "service_account_client", "wait_for", "wait_pod_phase"]

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def api_client(kubeconfig: Path) -> client.ApiClient:
    """A client from a kubeconfig file (e.g. ControlPlane.admin_kubeconfig)."""
    api: client.ApiClient = config.new_client_from_config(
        config_file=str(kubeconfig))
    return api


def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def create_namespace(api: client.ApiClient, prefix: str = "t", timeout: float = 30.0) -> str:
    """A fresh namespace named prefix-<hex>; returns when its default ServiceAccount exists
    (pods are refused until the controller-manager has made it)."""
    v1 = core(api)
    name = f"{prefix}-{secrets.token_hex(3)}"
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_for(lambda: v1.read_namespaced_service_account("default", name), timeout,
             f"the default ServiceAccount of namespace {name} being created")
    return name


def delete_namespace(api: client.ApiClient, name: str) -> None:
    try:
        core(api).delete_namespace(name, grace_period_seconds=0)
    except ApiException as err:
        if err.status != 404:
            raise


def service_account_client(api: client.ApiClient, namespace: str, name: str,
                           expiration_seconds: int = 3600) -> client.ApiClient:
    """A client authenticated as ServiceAccount `namespace/name` (created when missing) by a
    bound token from the TokenRequest API: what a pod with that account would be."""
    v1 = core(api)
    try:
        v1.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as err:
        if err.status != 409:
            raise
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds))
    answer: Any = v1.create_namespaced_service_account_token(name, namespace, request)
    token = answer.status.token
    base = api.configuration
    conf = client.Configuration()
    conf.host = base.host
    conf.ssl_ca_cert = base.ssl_ca_cert
    conf.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(conf)


def remove_not_ready_taint(api: client.ApiClient, node: str) -> None:
    """Drop node.kubernetes.io/not-ready (no node-lifecycle controller runs to do it)."""
    v1 = core(api)
    found: Any = v1.read_node(node)
    taints = found.spec.taints or []
    kept = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints
            if t.key != NOT_READY_TAINT]
    if len(kept) != len(taints):
        v1.patch_node(node, {"spec": {"taints": kept or None}})


def add_fake_node(api: client.ApiClient, name: str, capacity: Mapping[str, str],
                  allocatable: Mapping[str, str] | None = None,
                  labels: Mapping[str, str] | None = None,
                  annotations: Mapping[str, str] | None = None) -> Any:
    """A Node with no kubelet: created through the API, its status patched Ready with the given
    capacity and allocatable (capacity when None), no taint.  For scheduling tests."""
    v1 = core(api)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(
        name=name, labels=labels, annotations=dict(annotations or {}))))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {
        "capacity": dict(capacity),
        "allocatable": dict(allocatable if allocatable is not None else capacity),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "fake node of the test bed", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}],
    }}
    v1.patch_node_status(name, status)
    remove_not_ready_taint(api, name)
    return v1.read_node(name)


def delete_node(api: client.ApiClient, name: str) -> None:
    try:
        core(api).delete_node(name)
    except ApiException as err:
        if err.status != 404:
            raise


def wait_pod_phase(api: client.ApiClient, namespace: str, name: str,
                   phases: tuple[str, ...] = ("Succeeded", "Failed"),
                   timeout: float = 60.0) -> Any:
    """The pod once its phase is one of `phases`; TimeoutError saying its last phase and
    conditions otherwise."""
    v1 = core(api)
    last: list[Any] = [None]

    def reached() -> Any:
        pod: Any = v1.read_namespaced_pod(name, namespace)
        last[0] = pod
        return pod if pod.status.phase in phases else None

    try:
        return wait_for(reached, timeout, f"pod {namespace}/{name} reaching {'/'.join(phases)}")
    except TimeoutError as err:
        pod = last[0]
        if pod is None:
            raise
        st = pod.status
        conds = [(c.type, c.status, c.reason, c.message) for c in st.conditions or []]
        states = [(c.name, c.state.to_dict()) for c in st.container_statuses or []]
        raise TimeoutError(f"{err}; phase {st.phase}, conditions {conds}, "
                           f"containers {states}") from None


def pod_output(pod: Any, container: str | None = None) -> str:
    """A terminated container's termination message: what it wrote to /dev/termination-log,
    or, when it failed with nothing there, its log's end (FallbackToLogsOnError).  The whole
    log of any container: Node.container_log."""
    for status in pod.status.container_statuses or []:
        if container in (None, status.name) and status.state.terminated is not None:
            return str(status.state.terminated.message or "")
    raise ValueError(f"pod {pod.metadata.namespace}/{pod.metadata.name} has no terminated "
                     f"container {container or ''}".rstrip())


def pod_manifest(name: str, image: str, command: Sequence[str], *,
                 node_name: str | None = None, **container: Any) -> dict[str, Any]:
    """A one-container pod that runs once: a locally imported image (imagePullPolicy Never),
    its log's end as termination message.  `container` adds container fields
    (resources, env, volumeMounts...)."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                        "command": list(command),
                        "terminationMessagePolicy": "FallbackToLogsOnError", **container}],
    }
    if node_name is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node_name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
