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


@pytest.mark.parametrize("written, mib", [("1k", 1000), ("2k", 2000), ("1500", 1500),
                                         ("1.5k", 1500), ("1e3", 1000), ("3000", 3000)])
def test_quantities_as_the_api_server_writes_them_back(written: str, mib: int) -> None:
    """The API server canonicalises `nvidia.com/gpumem: 1000` to "1k" in what it stores and
    sends to webhooks and watchers."""
    [w] = workloads_from_manifest(pod({"limits": {"nvidia.com/gpumem": written}}), "p.yaml")
    assert w.workload.request.gpumem_mib == mib


@pytest.mark.parametrize("written", ["1.5", "1Ki", "2Mi", "1.0005k", "1e-1", "k", ""])
def test_fractions_and_binary_suffixes_are_refused(written: str) -> None:
    with pytest.raises(PodError, match="must be a whole number of MiB"):
        workloads_from_manifest(pod({"limits": {"nvidia.com/gpumem": written}}), "p.yaml")
