"""Pod manifests -> workloads: limits (then requests), controllers through their template,
configurable resource names, and errors that name the file, the container and the key."""

from __future__ import annotations

import pytest

from gpuwarden.resources import ResourceNames
from policy.model import ResourceRequest
from policy.pods import PodError, workloads_from_manifest


def pod(resources: dict[str, object], **meta: object) -> dict[str, object]:
    return {"kind": "Pod", "metadata": {"name": "p", **meta},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": resources}]}}


def test_limits_are_read() -> None:
    [w] = workloads_from_manifest(pod({"limits": {
        "nvidia.com/gpu": 2, "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": 30,
        "nvidia.com/priority": 0}}, namespace="ns", labels={"a": "b"}), "p.yaml")
    assert w.uses_gpu and not w.init
    assert w.workload.request == ResourceRequest(gpu=2, gpumem_mib=3000, gpucores=30, priority=0)
    assert (w.workload.namespace, w.workload.name, w.workload.container, w.workload.node) == (
        "ns", "p", "c", "n1")
    assert dict(w.workload.labels) == {"a": "b"}


def test_requests_are_the_fallback_and_gpu_count_is_left_to_defaults() -> None:
    [w] = workloads_from_manifest(pod({"requests": {"nvidia.com/gpumem-percentage": 50}}), "p")
    assert w.workload.request == ResourceRequest(gpu=None, gpumem_percentage=50)
    assert w.workload.namespace == "default"


def test_no_gpu_container_is_marked_and_can_be_skipped() -> None:
    manifest = pod({})
    [w] = workloads_from_manifest(manifest, "p")
    assert not w.uses_gpu
    assert workloads_from_manifest(manifest, "p", gpu_only=True) == []


def test_controller_template_and_init_containers() -> None:
    manifest = {"kind": "CronJob", "metadata": {"name": "nightly", "namespace": "ml"},
                "spec": {"jobTemplate": {"spec": {"template": {
                    "metadata": {"labels": {"team": "nlp"}},
                    "spec": {"initContainers": [{"name": "warm", "resources": {
                        "limits": {"nvidia.com/gpu": 1}}}],
                        "containers": [{"name": "main"}]}}}}}}
    ws = workloads_from_manifest(manifest, "cj.yaml")
    assert [(w.container, w.init) for w in ws] == [("warm", True), ("main", False)]
    assert dict(ws[0].workload.labels) == {"team": "nlp"} and ws[0].workload.name == "nightly"


def test_custom_resource_names() -> None:
    names = ResourceNames(gpumem="example.com/vram")
    [w] = workloads_from_manifest(pod({"limits": {"example.com/vram": 100}}), "p", names)
    assert w.workload.request.gpumem_mib == 100


@pytest.mark.parametrize("resources, message", [
    ({"limits": {"nvidia.com/gpumem": "3Gi"}},
     "p.yaml: container \"c\".resources.limits['nvidia.com/gpumem'] = '3Gi': must be a whole "
     "number of MiB"),
    ({"limits": {"nvidia.com/gpucores": 150}}, "= 150: out of range; must be a percentage 0..100"),
    ({"limits": {"nvidia.com/priority": 2}}, "must be 0 (high) or 1 (low)"),
    ({"limits": {"nvidia.com/gpu": True}}, "must be a whole number of GPUs"),
    ({"limits": ["nvidia.com/gpu"]}, "resources.limits must be a mapping"),
])
def test_bad_values_name_the_place(resources: dict[str, object], message: str) -> None:
    with pytest.raises(PodError) as err:
        workloads_from_manifest(pod(resources), "p.yaml")
    assert message in str(err.value)


@pytest.mark.parametrize("manifest, message", [
    ({"kind": "Service", "metadata": {"name": "s"}}, "kind 'Service' is not a pod"),
    ({"kind": "Pod", "metadata": {}}, "metadata.name is missing"),
    ({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{}]}},
     "spec.containers[0].name is missing"),
    ({"kind": "Pod", "metadata": {"name": "p", "labels": {"a": {"b": 1}}}},
     "metadata.labels: entry 'a' must map a string to a string"),
    ("just a string", "must be a mapping"),
])
def test_bad_manifests(manifest: object, message: str) -> None:
    with pytest.raises(PodError, match=r"x\.yaml") as err:
        workloads_from_manifest(manifest, "x.yaml")
    assert message in str(err.value)


@pytest.mark.parametrize(("text", "mib"), [("30k", 30000), ("3000", 3000), ("1.5k", 1500),
                                           ("2e3", 2000), ("1M", 1000000)])
def test_quantities_as_the_api_server_returns_them_are_read(text: str, mib: int) -> None:
    # the API server stores 30000 as "30k": pods read back from it must mean the same
    [w] = workloads_from_manifest(pod({"limits": {"nvidia.com/gpumem": text}}), "p")
    assert w.workload.request.gpumem_mib == mib


@pytest.mark.parametrize("text", ["1.5", "3Gi", "2000m", "1e-3", "k", "1e999", "1e99999999",
                                  "1" * 5000])
def test_fractional_or_binary_quantities_are_refused(text: str) -> None:
    with pytest.raises(PodError, match="must be a whole number of MiB"):
        workloads_from_manifest(pod({"limits": {"nvidia.com/gpumem": text}}), "p")
