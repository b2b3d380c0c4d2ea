"""Nodes without a kubelet (add_fake_node) are Ready with the resources given, and the real
scheduler places pods on them by those resources."""

from __future__ import annotations

import pytest
from testbed import images
from testbed.kube import core, pod_manifest, wait_for

pytestmark = pytest.mark.k8s


def test_fake_node_is_ready_with_its_allocatable_and_takes_a_pod(
        k8s_api, k8s_namespace, k8s_fake_node) -> None:
    node = k8s_fake_node("fake-a", capacity={"cpu": "8", "memory": "32Gi", "pods": "110",
                                             "example.com/widget": "4"},
                         allocatable={"cpu": "7", "memory": "30Gi", "pods": "110",
                                      "example.com/widget": "3"},
                         labels={"gpu": "yes"}, annotations={"example.com/inventory": "[]"})
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert [c.status for c in ready] == ["True"]
    assert node.status.allocatable["example.com/widget"] == "3"
    assert node.metadata.labels["gpu"] == "yes"
    assert not node.spec.taints

    pod = pod_manifest("wants-widget", images.BUSYBOX_IMAGE, ["true"],
                       resources={"limits": {"example.com/widget": "2"}})
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    bound = wait_for(lambda: core(k8s_api).read_namespaced_pod("wants-widget", k8s_namespace)
                     .spec.node_name, 20, "the scheduler binding the pod")
    assert bound == "fake-a"


def test_pod_asking_more_than_allocatable_stays_pending(
        k8s_api, k8s_namespace, k8s_fake_node) -> None:
    k8s_fake_node("fake-b", capacity={"cpu": "8", "memory": "32Gi", "pods": "110",
                                      "example.com/gadget": "1"})
    pod = pod_manifest("too-big", images.BUSYBOX_IMAGE, ["true"],
                       resources={"limits": {"example.com/gadget": "2"}})
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)

    def unschedulable() -> str | None:
        conds = core(k8s_api).read_namespaced_pod("too-big", k8s_namespace).status.conditions
        return next((c.message for c in conds or [] if c.reason == "Unschedulable"), None)

    message = wait_for(unschedulable, 20, "the scheduler marking the pod Unschedulable")
    assert "Insufficient example.com/gadget" in message
