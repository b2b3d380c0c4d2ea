"""deploy/ against a real API server (the test bed): every object passes server-side dry-run
(the Prometheus Operator's two CRDs are installed first in a minimal form, since the test bed
has no operator), and each component's ServiceAccount, bound by exactly the RBAC of deploy/,
can make the calls that component makes, and not more."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from manifests import rendered, rendered_text

pytestmark = pytest.mark.k8s

NS = "gpuwarden-system"
CRDS = [("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
        ("monitoring.coreos.com", "PrometheusRule", "prometheusrules")]


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([shutil.which("kubectl") or "kubectl", f"--kubeconfig={kubeconfig}",
                          *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kubectl {' '.join(args)} failed:\n{out.stderr}"
    return out.stdout


def crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def installed(k8s_cluster) -> Iterator[Path]:
    """The namespace, the monitoring CRDs and deploy/'s RBAC objects applied for real (the
    workloads are not: their image cannot be pulled here)."""
    admin = k8s_cluster.admin_kubeconfig
    kubectl(admin, "apply", "-f", "-", stdin="\n---\n".join(
        yaml.safe_dump(crd(*c)) for c in CRDS))
    for _g, _k, plural in CRDS:
        kubectl(admin, "wait", "--for=condition=Established", "--timeout=60s",
                f"crd/{plural}.monitoring.coreos.com")
    rbac = [d for d in rendered() if d["kind"] in (
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding")]
    kubectl(admin, "apply", "--server-side", "-f", "-",
            stdin="\n---\n".join(yaml.safe_dump(d) for d in rbac))
    yield admin


def test_every_object_passes_server_side_dry_run(installed: Path) -> None:
    out = kubectl(installed, "apply", "--server-side", "--dry-run=server",
                  "--field-manager=gpuwarden-test", "-f", "-", stdin=rendered_text())
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == len(rendered()), out
    assert all("(server dry run)" in ln for ln in lines), out


def token_kubeconfig(cp: Any, admin_api: client.ApiClient, account: str, tmp: Path) -> Path:
    """A kubeconfig holding a bound token of ServiceAccount gpuwarden-system/<account>."""
    from testbed.controlplane import write_kubeconfig

    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    token = client.CoreV1Api(admin_api).create_namespaced_service_account_token(
        account, NS, req).status.token
    return write_kubeconfig(tmp / f"{account}.kubeconfig", cp.url, cp.pki.ca.cert, token=token)


def can(api: client.ApiClient, verb: str, resource: str, namespace: str = "",
        subresource: str = "", name: str = "", group: str = "") -> bool:
    review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(
            verb=verb, resource=resource, namespace=namespace or None,
            subresource=subresource or None, name=name or None, group=group)))
    return bool(client.AuthorizationV1Api(api).create_self_subject_access_review(
        review).status.allowed)


@pytest.fixture
def fake_node(k8s_api) -> Iterator[str]:
    import secrets

    from testbed.kube import add_fake_node

    name = f"rbac-node-{secrets.token_hex(3)}"
    add_fake_node(k8s_api, name, {"cpu": "4", "memory": "8Gi", "pods": "10"},
                  labels={"gpuwarden.io/gpu": "on", "pool": "a"})
    yield name
    client.CoreV1Api(k8s_api).delete_node(name)


def pending_pod(api: client.ApiClient, namespace: str, name: str) -> Any:
    """A pod no scheduler takes (its scheduler does not exist): it waits for a bind."""
    return client.CoreV1Api(api).create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "nobody", "containers": [
            {"name": "main", "image": "busybox", "imagePullPolicy": "Never",
             "resources": {"limits": {"nvidia.com/gpumem": "1000"}}}]}})


def test_the_node_account_runs_the_agents_watch_and_events_and_the_plugins_annotations(
        installed, k8s_cluster, k8s_api, k8s_namespace, fake_node, tmp_path):
    from agent.kubeapi import KubeApi
    from deviceplugin.kube import KubeCluster
    from gpuwarden.kubeclient import api_client
    from gpuwarden.resources import ResourceNames

    kc = token_kubeconfig(k8s_cluster, k8s_api, "gpuwarden-node", tmp_path)
    pod = pending_pod(k8s_api, k8s_namespace, "p")
    client.CoreV1Api(k8s_api).create_namespaced_binding(k8s_namespace, {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": fake_node}},
        _preload_content=False)  # the client cannot read a Binding answer back

    # the agent: list + watch the node's pods, its node's labels, an Event on the pod
    api = KubeApi(api_client(str(kc)))
    listed = api.pods_of_node(fake_node).list()
    assert [p["metadata"]["name"] for p in listed.items] == ["p"]
    events = list(api.pods_of_node(fake_node).watch(listed.resource_version, timeout_s=1))
    assert all(e["type"] in ("BOOKMARK", "MODIFIED", "ADDED") for e in events)
    [node] = api.node(fake_node).list().items
    assert node["metadata"]["labels"]["pool"] == "a"
    list(api.node(fake_node).watch(listed.resource_version, timeout_s=1))
    api.create_event({"apiVersion": "v1", "kind": "Event",
                      "metadata": {"generateName": "p.gpuwarden-", "namespace": k8s_namespace},
                      "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p",
                                         "namespace": k8s_namespace,
                                         "uid": pod.metadata.uid},
                      "reason": "GpuwardenKilled", "message": "rbac test", "type": "Warning",
                      "source": {"component": "gpuwarden-agent", "host": fake_node}})

    # the device plugin: its node's pods, the node's inventory annotation, a pod's phase
    dp = KubeCluster(ResourceNames(), str(kc))
    try:
        assert [p.name for p in dp.pods_on_node(fake_node)] == ["p"]
        dp.annotate_node(fake_node, {"gpuwarden.io/node-gpus": "{}"})
        dp.annotate_pod(k8s_namespace, "p", {"gpuwarden.io/bind-phase": "success"})
    finally:
        dp.close()  # its pod informer's thread, which would outlive the API server
    got = client.CoreV1Api(k8s_api).read_namespaced_pod("p", k8s_namespace)
    assert got.metadata.annotations["gpuwarden.io/bind-phase"] == "success"

    # and nothing it does not need
    nodeapi = api_client(str(kc))
    assert not can(nodeapi, "create", "pods", k8s_namespace, subresource="binding")
    assert not can(nodeapi, "delete", "pods", k8s_namespace)
    assert not can(nodeapi, "list", "secrets", k8s_namespace)
    assert not can(nodeapi, "update", "nodes")


def test_the_extender_account_watches_reserves_annotates_and_binds(
        installed, k8s_cluster, k8s_api, k8s_namespace, fake_node, tmp_path):
    from extender.kube import KubeClusterApi
    from gpuwarden.kubeclient import api_client

    kc = token_kubeconfig(k8s_cluster, k8s_api, "gpuwarden-extender", tmp_path)
    ext = KubeClusterApi(str(kc))
    pod = pending_pod(k8s_api, k8s_namespace, "q")
    nodes = ext.node_watch().list()
    assert fake_node in [n["metadata"]["name"] for n in nodes.items]
    list(ext.node_watch().watch(nodes.resource_version, 1))
    pods = ext.pod_watch().list()
    list(ext.pod_watch().watch(pods.resource_version, 1))
    node = ext.read_node(fake_node)
    ext.patch_node_annotations(fake_node, {"gpuwarden.io/allocations": "{}"},
                               node["metadata"]["resourceVersion"])
    assert ext.read_pod(k8s_namespace, "q")["metadata"]["uid"] == pod.metadata.uid
    ext.patch_pod_annotations(k8s_namespace, "q", {"gpuwarden.io/bind-phase": "allocating"})
    ext.bind(k8s_namespace, "q", pod.metadata.uid, fake_node)
    got = client.CoreV1Api(k8s_api).read_namespaced_pod("q", k8s_namespace)
    assert got.spec.node_name == fake_node

    extapi = api_client(str(kc))
    assert not can(extapi, "delete", "pods", k8s_namespace)
    assert not can(extapi, "update", "nodes")
    assert not can(extapi, "get", "secrets", k8s_namespace)


def test_the_scheduler_account_schedules_and_holds_its_lease(
        installed, k8s_cluster, k8s_api, tmp_path):
    from gpuwarden.kubeclient import api_client

    sched = api_client(str(token_kubeconfig(k8s_cluster, k8s_api, "gpuwarden-scheduler",
                                            tmp_path)))
    assert can(sched, "create", "pods", "default", subresource="binding")
    assert can(sched, "watch", "pods")
    assert can(sched, "list", "nodes")
    assert can(sched, "create", "leases", NS, group="coordination.k8s.io")
    assert can(sched, "update", "leases", NS, name="gpuwarden-scheduler",
               group="coordination.k8s.io")
    assert not can(sched, "update", "leases", NS, name="other", group="coordination.k8s.io")
    assert not can(sched, "patch", "pods", "default")  # annotations are the extender's
