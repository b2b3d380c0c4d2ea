"""`gpuwarden deviceplugin` beside the test bed's real kubelet and containerd, on the simulated
GPU (2 devices of 8 GiB): it registers, the Node's allocatable shows GPUs x split, a pod that asks
for a slice starts and its process sees the slice through NVML and CUDA and gets an ordinary
out-of-memory error beyond it; a kubelet restart is followed by re-registration within 2 s; a
plugin restart leaves running pods their slices.

The simulated driver's libraries and state folder reach the container through the plugin's
driverMounts setting, as a node's NVIDIA container runtime would bring the real ones; libvgpu
arrives through the plugin's mounts and /etc/ld.so.preload. The tests write the extender's
assignment annotation themselves.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cprog import compile_c
from testbed import images, wait_for
from testbed.agentproc import PluginProcess, audit_event, cluster_agent, pod_sim_env
from testbed.kube import core, pod_manifest, wait_pod_phase
from testbed.node import DEVICE_PLUGIN_DIR

from gpuwarden.annotations import (
    ALLOCATED,
    BIND_PHASE,
    ContainerAssignment,
    DeviceGrant,
    PodAssignment,
    assignment_annotations,
    decode_node_gpus,
)
from libvgpu.paths import shim_path, sim_lib_dir
from libvgpu.region import Region
from libvgpu.sim import SIM_CTX_OVERHEAD

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[3]
SPLIT = 4
MIB = 1 << 20
SOCKET = "gpuwarden-test.sock"


class PluginProc(PluginProcess):
    def __init__(self, folder: Path, node: Any, env: dict[str, str]) -> None:
        super().__init__(folder / "deviceplugin.log", env)
        self.folder, self.node = folder, node
        self.regions = folder / "regions"

    def start(self) -> PluginProc:
        sim = Path(self.env["GPUWARDEN_SIM_STATE"]).parent
        cmd = ["deviceplugin", "--node", self.node.name,
               "--kubeconfig", str(self.node.cp.admin_kubeconfig),
               "--plugin-dir", str(DEVICE_PLUGIN_DIR), "--socket-name", SOCKET,
               "--pod-resources-socket",
               str(self.node.kubelet_root / "pod-resources" / "kubelet.sock"),
               "--libvgpu", str(shim_path()), "--region-root", str(self.regions),
               "--device-split-count", str(SPLIT), "--driver-mount", str(sim_lib_dir()),
               "--driver-mount", f"{sim}:rw", "--health-seconds", "1"]
        self.launch(cmd)
        return self

    def registrations(self) -> int:
        return len(re.findall(r"registered nvidia\.com/gpu", self.log.read_text()))



@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return pod_sim_env(tmp_path_factory.mktemp("sim"))


@pytest.fixture(scope="module")
def plugin(k8s_node: Any, sim: dict[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginProc]:
    p = PluginProc(tmp_path_factory.mktemp("dp"), k8s_node, sim).start()
    try:
        wait_for(lambda: p.registrations() >= 1 or p.proc.poll() is not None, 60,
                 "the device plugin registering")
        assert p.proc is not None and p.proc.poll() is None, p.log.read_text()
        yield p
    finally:
        p.stop()  # (the test bed may have stopped the node, and the plugin with it, already)


@pytest.fixture(scope="module")
def agent(k8s_node: Any, sim: dict[str, str], plugin: PluginProc,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The node agent in cluster mode over the plugin's regions; yields its audit log."""
    with cluster_agent(k8s_node, sim, plugin.regions, tmp_path_factory.mktemp("agent")) as log:
        yield log


@pytest.fixture(scope="module")
def probe_image(k8s_node: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("probe")
    exe = compile_c(Path(__file__).with_name("slice_probe.c"), d / "bin")
    image = images.build_image(d / "img", "gpuwarden.test/slice-probe:1", {"/app/probe": exe})
    return k8s_node.import_image(image)


def allocatable(api: Any, node: str) -> str | None:
    return (core(api).read_node(node).status.allocatable or {}).get("nvidia.com/gpu")


def slice_pod(name: str, node: str, image: str, uuid: str, mib: int, cmd: list[str],
              sim: dict[str, str]) -> dict[str, Any]:
    env = [{"name": k, "value": sim[k]} for k in ("LD_LIBRARY_PATH", "GPUWARDEN_SIM_STATE",
                                                  "GPUWARDEN_SIM_DEVICES",
                                                  "GPUWARDEN_SIM_MEMORY")]
    pod = pod_manifest(name, image, cmd, node_name=node, env=env,
                       resources={"limits": {"nvidia.com/gpu": "1"}})
    assignment = PodAssignment(node=node, containers=(ContainerAssignment(
        name="main", devices=(DeviceGrant(uuid, 0, mib, 0),)),))
    pod["metadata"]["annotations"] = assignment_annotations(assignment, "allocating",
                                                            int(time.time()))
    return pod


def node_gpus(api: Any, node: str) -> Any:
    ann = core(api).read_node(node).metadata.annotations or {}
    return decode_node_gpus(ann["gpuwarden.io/node-gpus"]) if "gpuwarden.io/node-gpus" in \
        ann else None


def test_registers_and_allocatable_is_gpus_times_split(k8s_api, k8s_node, plugin) -> None:
    wait_for(lambda: allocatable(k8s_api, k8s_node.name) == str(2 * SPLIT), 30,
             "allocatable nvidia.com/gpu = 2 x split")
    inv = wait_for(lambda: node_gpus(k8s_api, k8s_node.name), 10, "the node inventory")
    assert inv.split_count == SPLIT
    assert [(d.index, d.memory_mib, d.healthy) for d in inv.devices] == [(0, 8192, True),
                                                                         (1, 8192, True)]


def test_pod_sees_its_slice_and_is_refused_memory_beyond_it(
        k8s_api, k8s_node, k8s_namespace, plugin, probe_image, sim) -> None:
    uuid = node_gpus(k8s_api, k8s_node.name).devices[1].uuid
    pod = slice_pod("probe", k8s_node.name, probe_image, uuid, 1000,
                    ["/app/probe", str(512 * MIB), str(1024 * MIB)], sim)
    created = core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    done = wait_pod_phase(k8s_api, k8s_namespace, "probe", timeout=90)
    out = k8s_node.container_log(done)
    assert done.status.phase == "Succeeded", out + plugin.log.read_text()
    got = dict(line.split("=", 1) for line in out.split())
    assert got == {"nvml_total": str(1000 * MIB), "cuda_total": str(1000 * MIB),
                   "alloc_within": "0", "alloc_beyond": "2"}, out
    ann = done.metadata.annotations
    assert (ann[BIND_PHASE], ann[ALLOCATED]) == ("success", '["main"]')
    # the kubelet's PodResources confirmed that the devices went to this container
    assert f"pod {k8s_namespace}/probe container main verified through PodResources" in \
        plugin.log.read_text()
    region = plugin.regions / f"{created.metadata.uid}_main" / "vgpu.region"
    with Region.open(region) as r:
        assert r.snapshot().device(uuid).limit_bytes == 1000 * MIB


def test_kubelet_restart_is_followed_by_registration_within_2s(
        k8s_api, k8s_node, plugin) -> None:
    before = plugin.registrations()
    kubelet_sock = DEVICE_PLUGIN_DIR / "kubelet.sock"
    k8s_node.restart_kubelet()
    seen = wait_for(lambda: time.time() if plugin.registrations() > before else None, 10,
                    "the plugin registering again")
    latency = seen - kubelet_sock.stat().st_ctime
    print(f"re-registered {latency * 1000:.0f} ms after the kubelet's socket appeared")
    assert latency < 2.0, f"re-registered {latency:.2f}s after the kubelet's socket appeared"
    wait_for(lambda: allocatable(k8s_api, k8s_node.name) == str(2 * SPLIT), 30,
             "allocatable restored")


def test_plugin_restart_leaves_running_pods_their_slices_and_the_agent_adopts_them(
        k8s_api, k8s_node, k8s_namespace, plugin, agent, probe_image, sim) -> None:
    uuid = node_gpus(k8s_api, k8s_node.name).devices[0].uuid
    pod = slice_pod("holder", k8s_node.name, probe_image, uuid, 700,
                    ["/app/probe", str(300 * MIB), str(600 * MIB), "hold"], sim)
    created = core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    wait_pod_phase(k8s_api, k8s_namespace, "holder", phases=("Running",), timeout=90)
    region = plugin.regions / f"{created.metadata.uid}_main" / "vgpu.region"

    held_bytes = 300 * MIB + SIM_CTX_OVERHEAD  # its allocation and its context

    def held() -> bool:
        with Region.open(region) as r:
            snap = r.snapshot().device(uuid)
        if snap.used_bytes != held_bytes:
            raise AssertionError(f"region {region}: {snap}")
        return True

    wait_for(held, 30, "the holder's allocation counted in its region")
    adopted = wait_for(lambda: audit_event(agent, lambda e: e.get("event") == "workload_adopted"
                                           and e["workload"]["pod"] == "holder"
                                           and e["workload"]["namespace"] == k8s_namespace), 30,
                       "the agent adopting the holder's container")
    assert adopted["region"] == str(region) and adopted["region_error"] is None
    before = plugin.registrations()
    assert plugin.stop() == 0
    plugin.start()
    wait_for(lambda: plugin.registrations() > before, 30, "the restarted plugin registering")
    with Region.open(region) as r:
        d = r.snapshot().device(uuid)
        assert (d.limit_bytes, d.used_bytes) == (700 * MIB, held_bytes)
    assert core(k8s_api).read_namespaced_pod("holder", k8s_namespace).status.phase == "Running"
    core(k8s_api).delete_namespaced_pod("holder", k8s_namespace, grace_period_seconds=0)


def test_sigterm_stops_the_plugin_and_removes_its_socket(plugin) -> None:
    assert (DEVICE_PLUGIN_DIR / SOCKET).exists()
    assert plugin.stop() == 0, plugin.log.read_text()
    assert not (DEVICE_PLUGIN_DIR / SOCKET).exists()
    assert plugin.log.read_text().rstrip().endswith("stopped")
