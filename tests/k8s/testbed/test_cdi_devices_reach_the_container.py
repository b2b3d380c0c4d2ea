"""The test bed's containerd applies CDI specs from `Node.cdi_dir`: a device plugin that answers
Allocate with a CDI device name gets that device's env and mounts into the container."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from testbed import images
from testbed.kube import core, pod_manifest, wait_for, wait_pod_phase
from testbed.node import DEVICE_PLUGIN_DIR

from deviceplugin.api import device_plugin

pytestmark = pytest.mark.k8s

RESOURCE = "gpuwarden.test/probe"
SOCKET = "gwtb-cdi-probe.sock"


class _Probe:
    """A one-device plugin whose Allocate names CDI device gpuwarden.test/probe=one."""

    def __init__(self) -> None:
        self.api = device_plugin()
        self.stopped = threading.Event()
        self.allocated: list[list[str]] = []

    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return self.api.pb.DevicePluginOptions()

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
        yield self.api.pb.ListAndWatchResponse(
            devices=[self.api.pb.Device(ID="probe-0", health="Healthy")])
        self.stopped.wait()

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        return self.api.pb.PreferredAllocationResponse()

    def PreStartContainer(self, request: Any, context: Any) -> Any:
        return self.api.pb.PreStartContainerResponse()

    def Allocate(self, request: Any, context: Any) -> Any:
        pb = self.api.pb
        self.allocated += [list(r.devices_ids) for r in request.container_requests]
        return pb.AllocateResponse(container_responses=[
            pb.ContainerAllocateResponse(cdi_devices=[pb.CDIDevice(name=f"{RESOURCE}=one")])
            for _ in request.container_requests])


@pytest.fixture
def probe_plugin(k8s_node) -> Iterator[_Probe]:
    probe = _Probe()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    probe.api.grpc.add_DevicePluginServicer_to_server(probe, server)
    path = DEVICE_PLUGIN_DIR / SOCKET
    path.unlink(missing_ok=True)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    with grpc.insecure_channel(f"unix://{DEVICE_PLUGIN_DIR / 'kubelet.sock'}") as channel:
        probe.api.grpc.RegistrationStub(channel).Register(probe.api.pb.RegisterRequest(
            version="v1beta1", endpoint=SOCKET, resource_name=RESOURCE), timeout=10)
    try:
        yield probe
    finally:
        probe.stopped.set()
        server.stop(0)
        path.unlink(missing_ok=True)


def test_allocated_cdi_device_brings_its_env_and_mount(
        k8s_api, k8s_node, k8s_namespace, probe_plugin, tmp_path: Path) -> None:
    shared = tmp_path / "probe.txt"
    shared.write_text("mounted by CDI\n")
    spec = {"cdiVersion": "0.6.0", "kind": RESOURCE,
            "containerEdits": {"env": ["GWTB_CDI_KIND=probe"]},
            "devices": [{"name": "one", "containerEdits": {
                "env": ["GWTB_CDI_DEVICE=one"],
                "mounts": [{"hostPath": str(shared), "containerPath": "/cdi/probe.txt",
                            "options": ["ro", "bind"]}]}}]}
    (k8s_node.cdi_dir / "gwtb-probe.json").write_text(json.dumps(spec))

    wait_for(lambda: (core(k8s_api).read_node(k8s_node.name).status.allocatable or {})
             .get(RESOURCE) == "1", 30, f"{RESOURCE} in the node's allocatable")
    pod = pod_manifest("cdi", images.BUSYBOX_IMAGE,
                       ["sh", "-c", "echo $GWTB_CDI_KIND $GWTB_CDI_DEVICE; cat /cdi/probe.txt"],
                       node_name=k8s_node.name, resources={"limits": {RESOURCE: "1"}})
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    done = wait_pod_phase(k8s_api, k8s_namespace, "cdi")
    assert k8s_node.container_log(done) == "probe one\nmounted by CDI\n"
    assert probe_plugin.allocated == [["probe-0"]]
