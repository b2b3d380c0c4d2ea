"""The admission webhook judges DRA claims made for pods against the policy, on the real API
server and controller-manager (which makes each pod's claim from its ResourceClaimTemplate):
a claim in a namespace the policy denies is refused with the policy's message (the pod waits,
its Event says why), and a template that gives no memory gets the policy's default."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpucluster import GpuCluster
from kubernetes import client
from testbed import wait_for
from testbed.kube import pod_manifest

from gpuwarden.quantity import parse_quantity

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
GROUP, V = "resource.k8s.io", "v1"


@pytest.fixture
def dra(gpu_cluster: GpuCluster) -> Any:
    objects = client.CustomObjectsApi(gpu_cluster.api)
    made = []
    for doc in yaml.safe_load_all((REPO / "deploy" / "dra" / "deviceclasses.yaml").read_text()):
        try:
            objects.create_cluster_custom_object(GROUP, V, "deviceclasses", doc)
            made.append(doc["metadata"]["name"])
        except client.ApiException as err:
            if err.status != 409:
                raise
    yield objects
    for name in made:
        objects.delete_cluster_custom_object(GROUP, V, "deviceclasses", name)


def namespace(api: Any, prefix: str) -> str:
    v1 = client.CoreV1Api(api)
    name = f"{prefix}-{secrets.token_hex(3)}"
    v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    wait_for(lambda: v1.read_namespaced_service_account("default", name), 30,
             f"the default ServiceAccount of {name}")
    return name


def pod_with_template(objects: Any, api: Any, ns: str, capacity: dict[str, str] | None) -> None:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.gpuwarden.io"}
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    objects.create_namespaced_custom_object(GROUP, V, ns, "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/{V}", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "slice"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}})
    pod = pod_manifest("train", "gpuwarden.test/busybox:1", ["true"])
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "slice"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    client.CoreV1Api(api).create_namespaced_pod(ns, pod)


def test_a_claim_the_policy_denies_is_refused_and_the_pod_says_why(gpu_cluster, dra) -> None:
    api = gpu_cluster.api
    ns = namespace(api, "sandbox")  # examples/policies: sandbox-* without approval: denied
    pod_with_template(dra, api, ns, {"memory": "1Gi"})

    def refused() -> Any:
        events = client.CoreV1Api(api).list_namespaced_event(
            ns, field_selector="involvedObject.name=train").items
        return next((e for e in events if "denied by policy" in (e.message or "")), None)

    event = wait_for(refused, 60, "an Event on the pod saying the claim was refused")
    assert "GPU use in sandbox namespaces needs the gpuwarden.io/approved=true label" in \
        event.message, event.message
    assert dra.list_namespaced_custom_object(GROUP, V, ns, "resourceclaims")["items"] == []


def test_a_template_without_memory_gets_the_policy_default(gpu_cluster, dra) -> None:
    api = gpu_cluster.api
    ns = namespace(api, "dra-default")
    pod_with_template(dra, api, ns, None)
    claim = wait_for(lambda: next(iter(dra.list_namespaced_custom_object(
        GROUP, V, ns, "resourceclaims")["items"]), None), 60, "the pod's claim made")
    asked = claim["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]
    assert parse_quantity(asked["memory"], "memory") == 5000 << 20  # examples/policies default
