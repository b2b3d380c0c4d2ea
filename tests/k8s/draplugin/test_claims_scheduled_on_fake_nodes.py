"""The real kube-scheduler places claims on the ResourceSlices the DRA driver's core publishes,
on fake nodes (no kubelet: pods are bound, never run): the example DeviceClasses select the
devices, the slices and claim templates are accepted by the API server, a burst of pods never
over-allocates a GPU's memory or cores, and pods that fit nowhere wait.

The slow 500-pod burst on 50 nodes x 8 GPUs is the same shape as the extender's
(tests/extender/test_k8s_extender_and_webhook.py), for pods/s through DRA against pods/s through
the extender."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from draobjects import (
    GROUP,
    V,
    allocated,
    claims,
    consumed,
    create_classes,
    delete_classes,
    objects,
    pod_with_claim,
    template,
)
from kubernetes import client
from testbed import images, wait_for
from testbed.kube import core, pod_manifest

from deviceplugin.devices import PhysicalGpu
from draplugin.core import resource_slice
from gpuwarden.config import Settings

pytestmark = pytest.mark.k8s

GIB = 1 << 30
# the fake nodes' label, which the pods select: other nodes of the test bed may publish slices
POOL = {"gpuwarden.test/dra-fake": "true"}


@pytest.fixture
def dra_nodes(k8s_api: Any, k8s_fake_node: Callable[..., object]
              ) -> Iterator[Callable[[list[str], int, int], None]]:
    """Make fake nodes, each with the driver's ResourceSlice of `gpus` GPUs of `mib` MiB."""
    classes = create_classes(k8s_api)
    slices: list[str] = []

    def make(names: list[str], gpus: int, mib: int) -> None:
        for n in names:
            k8s_fake_node(n, {"cpu": "64", "memory": "512Gi", "pods": "110"}, labels=POOL)
            inv = [PhysicalGpu(f"GPU-{n}-{i}", i, mib, "NVIDIA H200", 0) for i in range(gpus)]
            body = resource_slice(n, inv, Settings(), generation=1)
            objects(k8s_api).create_cluster_custom_object(GROUP, V, "resourceslices", body)
            slices.append(body["metadata"]["name"])

    yield make
    for name in slices:
        objects(k8s_api).delete_cluster_custom_object(GROUP, V, "resourceslices", name)
    delete_classes(k8s_api, classes)


def burst(api: Any, namespace: str, tpl: str, count: int, threads: int = 8) -> list[str]:
    v1 = core(api)
    names = [f"p{i:03d}" for i in range(count)]
    errors: list[str] = []

    def create(chunk: list[str]) -> None:
        for name in chunk:
            pod = pod_with_claim(pod_manifest(name, images.BUSYBOX_IMAGE, ["true"]), tpl)
            pod["spec"]["nodeSelector"] = POOL
            try:
                v1.create_namespaced_pod(namespace, pod)
            except client.ApiException as err:
                errors.append(f"{name}: {err.body}")

    ts = [threading.Thread(target=create, args=(names[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    return names


def bound(api: Any, namespace: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in
            core(api).list_namespaced_pod(namespace).items if p.spec.node_name}


def unschedulable(api: Any, namespace: str, name: str) -> bool:
    pod = core(api).read_namespaced_pod(name, namespace)
    return any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
               for c in pod.status.conditions or [])


def check_no_overallocation(api: Any, namespace: str, mib: int) -> dict[tuple[str, str], Any]:
    used = consumed(claims(api, namespace))
    over = {k: v for k, v in used.items() if v["memory"] > mib << 20 or v["cores"] > 100}
    assert over == {}, over
    return used


def test_a_burst_fills_the_gpus_exactly_and_the_rest_waits(k8s_api, k8s_namespace,
                                                           dra_nodes) -> None:
    nodes = ["dra-a", "dra-b"]
    dra_nodes(nodes, 2, 8192)  # 4 GPUs of 8 GiB: 12 claims of 2.5 GiB fit (3 per GPU)
    tpl = template(k8s_api, k8s_namespace, "slice", memory="2560Mi", cores="20")
    names = burst(k8s_api, k8s_namespace, tpl, 16)
    wait_for(lambda: len(bound(k8s_api, k8s_namespace)) == 12, 120, "12 pods bound")
    used = check_no_overallocation(k8s_api, k8s_namespace, 8192)
    assert sorted(used) == [(n, f"gpu-{i}") for n in nodes for i in range(2)]
    assert {int(v["memory"]) for v in used.values()} == {3 * 2560 << 20}
    assert len(allocated(claims(k8s_api, k8s_namespace))) == 12
    # the 4 others wait, and the scheduler says why
    waiting = sorted(set(names) - set(bound(k8s_api, k8s_namespace)))
    assert len(waiting) == 4
    wait_for(lambda: all(unschedulable(k8s_api, k8s_namespace, n) for n in waiting), 60,
             "the 4 others marked unschedulable")


def test_a_claim_bigger_than_any_gpu_is_never_placed(k8s_api, k8s_namespace, dra_nodes) -> None:
    dra_nodes(["dra-c"], 1, 8192)
    tpl = template(k8s_api, k8s_namespace, "huge", memory="9Gi")
    (name,) = burst(k8s_api, k8s_namespace, tpl, 1, threads=1)
    wait_for(lambda: unschedulable(k8s_api, k8s_namespace, name), 60,
             "the pod marked unschedulable")
    assert core(k8s_api).read_namespaced_pod(name, k8s_namespace).spec.node_name is None


@pytest.mark.slow
def test_burst_of_500_pods_on_50_nodes_never_overallocates(k8s_api, k8s_namespace,
                                                           dra_nodes) -> None:
    nodes = [f"dra-burst-{i:02d}" for i in range(50)]
    dra_nodes(nodes, 8, 81920)
    tpl = template(k8s_api, k8s_namespace, "burst", memory="30000Mi", cores="30")
    started = time.monotonic()
    names = burst(k8s_api, k8s_namespace, tpl, 500)
    done = wait_for(lambda: (lambda b: b if len(b) == 500 else None)(
        bound(k8s_api, k8s_namespace)), 600, "all 500 pods bound")
    elapsed = time.monotonic() - started
    print(f"DRA: 500 pods created and bound onto 50 nodes x 8 GPUs in {elapsed:.1f} s "
          f"({500 / elapsed:.1f} pods/s)")
    assert sorted(done) == names  # zero lost pods
    used = check_no_overallocation(k8s_api, k8s_namespace, 81920)
    assert sum(1 for _ in allocated(claims(k8s_api, k8s_namespace))) == 500
    assert all(v["memory"] <= 2 * 30000 << 20 for v in used.values())
