"""Restarting the node's kubelet or containerd keeps running pods running; a kubelet restart
clears the device-plugin folder's sockets (which is why device plugins must re-register)."""

from __future__ import annotations

import socket

import pytest
from testbed import images
from testbed.kube import core, pod_manifest, wait_pod_phase
from testbed.node import DEVICE_PLUGIN_DIR

pytestmark = pytest.mark.k8s


def _start_sleeper(api, namespace: str, node) -> tuple[str, str]:
    core(api).create_namespaced_pod(namespace, pod_manifest(
        "sleeper", images.BUSYBOX_IMAGE, ["sleep", "3600"], node_name=node.name))
    pod = wait_pod_phase(api, namespace, "sleeper", ("Running",))
    return pod.metadata.uid, pod.status.container_statuses[0].container_id


def _still_running(api, namespace: str, uid: str, container: str) -> None:
    pod = core(api).read_namespaced_pod("sleeper", namespace)
    status = pod.status.container_statuses[0]
    assert (pod.metadata.uid, status.container_id) == (uid, container)
    assert pod.status.phase == "Running" and status.state.running is not None
    assert status.restart_count == 0


def _run_once(api, namespace: str, node, name: str) -> None:
    core(api).create_namespaced_pod(namespace, pod_manifest(
        name, images.BUSYBOX_IMAGE, ["true"], node_name=node.name))
    assert wait_pod_phase(api, namespace, name).status.phase == "Succeeded"


def test_kubelet_restart_keeps_pods_and_clears_plugin_sockets(
        k8s_api, k8s_node, k8s_namespace) -> None:
    uid, container = _start_sleeper(k8s_api, k8s_namespace, k8s_node)
    plugin = DEVICE_PLUGIN_DIR / "gwtb-restart-test.sock"
    plugin.unlink(missing_ok=True)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(plugin))
        k8s_node.restart_kubelet()
        assert not plugin.exists(), "the restarted kubelet left a plugin's socket in place"
    _still_running(k8s_api, k8s_namespace, uid, container)
    _run_once(k8s_api, k8s_namespace, k8s_node, "after-kubelet-restart")


def test_containerd_restart_keeps_pods(k8s_api, k8s_node, k8s_namespace) -> None:
    uid, container = _start_sleeper(k8s_api, k8s_namespace, k8s_node)
    old_pid = k8s_node.components["containerd"].pid
    k8s_node.restart_containerd()
    assert k8s_node.components["containerd"].pid != old_pid
    _still_running(k8s_api, k8s_namespace, uid, container)
    _run_once(k8s_api, k8s_namespace, k8s_node, "after-containerd-restart")
