"""`gpuwarden draplugin` beside the test bed's real kubelet, containerd 2 (CDI), scheduler and
controller-manager, on the simulated GPU (2 devices of 8 GiB): it registers and publishes its
ResourceSlice; pods whose claims (from examples/dra) ask 1 GiB / 10 % start with that slice and
get an ordinary out-of-memory error beyond it; a burst of claims never over-allocates a GPU;
a deleted pod's claim is unprepared and a pending pod starts; restarts of the kubelet and of
the driver keep slices; the agent adopts a claim's container, and (eBPF) kills a process that
allocates around libvgpu in it at its slice.

The simulated driver's libraries and state folder reach the containers through the driver's
--driver-mount, as a node's NVIDIA container runtime would bring the real ones; libvgpu, the
limits and the region arrive through the CDI spec the driver writes for each claim.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cprog import compile_c
from draobjects import (
    allocated,
    claims,
    consumed,
    create_classes,
    delete_classes,
    objects,
    pod_with_claim,
    template,
)
from testbed import images, wait_for
from testbed.agentproc import PluginProcess, audit_event, cluster_agent, pod_sim_env
from testbed.kube import core, pod_manifest, wait_pod_phase

from gpuwarden.quantity import parse_quantity
from libvgpu.paths import shim_path, sim_lib_dir
from libvgpu.region import Region

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[3]
PROBE_C = REPO / "tests" / "k8s" / "deviceplugin" / "slice_probe.c"
AROUND_C = REPO / "tests" / "e2e" / "progs" / "alloc_around_shim.c"
MIB, GIB = 1 << 20, 1 << 30
GROUP, V = "resource.k8s.io", "v1"


class DriverProc(PluginProcess):
    def __init__(self, folder: Path, node: Any, env: dict[str, str]) -> None:
        super().__init__(folder / "draplugin.log", env)
        self.folder, self.node = folder, node
        self.regions = folder / "regions"

    def start(self) -> DriverProc:
        sim = Path(self.env["GPUWARDEN_SIM_STATE"]).parent
        cmd = ["draplugin", "--node", self.node.name,
               "--kubeconfig", str(self.node.cp.admin_kubeconfig),
               "--kubelet-root", str(self.node.kubelet_root),
               "--cdi-dir", str(self.node.cdi_dir), "--state-dir", str(self.folder / "state"),
               "--libvgpu", str(shim_path()), "--region-root", str(self.regions),
               "--driver-mount", str(sim_lib_dir()), "--driver-mount", f"{sim}:rw",
               "--health-seconds", "1"]
        self.launch(cmd)
        return self

    def text(self) -> str:
        return self.log.read_text()



@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return pod_sim_env(tmp_path_factory.mktemp("sim"))


@pytest.fixture(scope="module")
def classes(k8s_api: Any) -> Iterator[None]:
    made = create_classes(k8s_api)
    yield
    delete_classes(k8s_api, made)


def node_slice(api: Any, node: str) -> dict[str, Any] | None:
    items = objects(api).list_cluster_custom_object(
        GROUP, V, "resourceslices", field_selector=f"spec.nodeName={node}")["items"]
    return next((s for s in items if s["spec"]["driver"] == "gpuwarden.io"), None)


@pytest.fixture(scope="module")
def driver(k8s_api: Any, k8s_node: Any, sim: dict[str, str], classes: None,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[DriverProc]:
    p = DriverProc(tmp_path_factory.mktemp("dra"), k8s_node, sim).start()
    try:
        wait_for(lambda: node_slice(k8s_api, k8s_node.name) or p.proc.poll() is not None,
                 60, "the DRA driver registering and publishing its ResourceSlice")
        assert p.proc is not None and p.proc.poll() is None, p.text()
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def agent(k8s_node: Any, sim: dict[str, str], driver: DriverProc,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The node agent in cluster mode over the driver's regions; yields its audit log."""
    with cluster_agent(k8s_node, sim, driver.regions, tmp_path_factory.mktemp("agent")) as log:
        yield log


@pytest.fixture(scope="module")
def probe_image(k8s_node: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("probe")
    exe = compile_c(PROBE_C, d / "bin")
    image = images.build_image(d / "img", "gpuwarden.test/dra-probe:1", {"/app/probe": exe})
    return k8s_node.import_image(image)


def claim_pod(name: str, node: str, image: str, tpl: str, cmd: list[str],
              sim: dict[str, str]) -> dict[str, Any]:
    env = [{"name": k, "value": sim[k]} for k in ("LD_LIBRARY_PATH", "GPUWARDEN_SIM_STATE",
                                                  "GPUWARDEN_SIM_DEVICES",
                                                  "GPUWARDEN_SIM_MEMORY")]
    return pod_with_claim(pod_manifest(name, image, cmd, node_name=node, env=env), tpl)


def test_registers_and_publishes_each_gpu_with_memory_and_cores_capacity(k8s_api, k8s_node,
                                                                         driver) -> None:
    sl = node_slice(k8s_api, k8s_node.name)
    assert sl is not None
    devs = {d["name"]: d for d in sl["spec"]["devices"]}
    assert sorted(devs) == ["gpu-0", "gpu-1"]
    assert devs["gpu-0"]["allowMultipleAllocations"] is True
    assert parse_quantity(devs["gpu-0"]["capacity"]["memory"]["value"], "memory") == 8 * GIB
    assert devs["gpu-1"]["attributes"]["healthy"] == {"bool": True}
    assert "registered with the kubelet as DRA driver gpuwarden.io" in driver.text()


def test_pod_with_a_1gib_10pct_claim_sees_its_slice_and_is_refused_memory_beyond_it(
        k8s_api, k8s_node, k8s_namespace, driver, probe_image, sim) -> None:
    tpl = template(k8s_api, k8s_namespace)
    pod = claim_pod("probe", k8s_node.name, probe_image, tpl,
                    ["/app/probe", str(512 * MIB), str(1024 * MIB), "hold"], sim)
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    running = wait_pod_phase(k8s_api, k8s_namespace, "probe", phases=("Running", "Failed"),
                             timeout=120)
    assert running.status.phase == "Running", driver.text()

    def report() -> dict[str, str] | None:
        out = k8s_node.container_log(running)
        return dict(line.split("=", 1) for line in out.split()) if "alloc_beyond" in out else None

    got = wait_for(report, 60, "the probe's report")
    assert got == {"nvml_total": str(GIB), "cuda_total": str(GIB), "alloc_within": "0",
                   "alloc_beyond": "2"}, got
    # while the pod runs, its claim holds 1 GiB / 10 % of one GPU, and so does its region
    (c,) = claims(k8s_api, k8s_namespace)
    (res,) = c["status"]["allocation"]["devices"]["results"]
    assert res["consumedCapacity"] == {"memory": "1Gi", "cores": "10"}
    region = driver.regions / "claims" / f"{c['metadata']['uid']}_gpu" / "vgpu.region"
    with Region.open(region) as r:
        snap = r.snapshot()
    assert [(d.limit_bytes, d.used_bytes > 512 * MIB) for d in snap.devices] == [(GIB, True)]
    core(k8s_api).delete_namespaced_pod("probe", k8s_namespace, grace_period_seconds=0)
    wait_for(lambda: not region.exists(), 60, "the claim's region removed after the pod")


BURST = 12  # 2 GPUs x 8 GiB hold 8 claims of 2 GiB; the 4 others wait


def test_a_burst_of_claims_never_overallocates_and_a_deleted_pod_frees_its_share(
        k8s_api, k8s_node, k8s_namespace, driver, sim) -> None:
    tpl = template(k8s_api, k8s_namespace, "gpu-2g", memory="2Gi")
    v1 = core(k8s_api)
    for i in range(BURST):
        v1.create_namespaced_pod(k8s_namespace, claim_pod(
            f"b{i}", k8s_node.name, images.BUSYBOX_IMAGE, tpl, ["sleep", "3600"], sim))

    def running() -> list[str]:
        pods = v1.list_namespaced_pod(k8s_namespace).items
        return sorted(p.metadata.name for p in pods if p.status.phase == "Running")

    wait_for(lambda: len(running()) == 8, 180, "8 of the burst's pods running")
    cs = claims(k8s_api, k8s_namespace)
    assert len(allocated(cs)) == 8
    assert {d: int(v["memory"]) for (_, d), v in consumed(cs).items()} == {
        "gpu-0": 8 * GIB, "gpu-1": 8 * GIB}
    pending = [p for p in v1.list_namespaced_pod(k8s_namespace).items
               if p.status.phase == "Pending"]
    assert len(pending) == BURST - 8
    prepared = sorted(p.name for p in (driver.regions / "claims").iterdir())
    assert len(prepared) >= 8

    # deleting a running pod unprepares its claim; a waiting pod gets the share and starts
    victim = running()[0]
    before = set(running())
    t0 = time.monotonic()
    v1.delete_namespaced_pod(victim, k8s_namespace, grace_period_seconds=0)
    newcomer = wait_for(lambda: next(iter(set(running()) - before), None), 120,
                        "a pending pod starting on the freed share")
    took = time.monotonic() - t0
    print(f"pending pod {newcomer} Running {took:.1f} s after {victim} was deleted")
    assert took < 30, f"the pending pod took {took:.1f} s to start after capacity freed"
    wait_for(lambda: f"unprepared claim {k8s_namespace}/{victim}-gpu" in driver.text(), 60,
             f"the claim of {victim} unprepared")
    assert all(v["memory"] <= 8 * GIB for v in consumed(claims(k8s_api, k8s_namespace)).values())
    for i in range(BURST):
        if f"b{i}" != victim:
            v1.delete_namespaced_pod(f"b{i}", k8s_namespace, grace_period_seconds=0)


def test_a_kubelet_restart_wipes_the_slice_and_the_driver_publishes_it_again(
        k8s_api, k8s_node, driver) -> None:
    before = driver.text().count("registered with the kubelet")
    k8s_node.restart_kubelet()
    wait_for(lambda: driver.text().count("registered with the kubelet") > before, 60,
             "the driver registered again with the new kubelet")
    sl = wait_for(lambda: node_slice(k8s_api, k8s_node.name), 60, "the slice published again")
    assert sorted(d["name"] for d in sl["spec"]["devices"]) == ["gpu-0", "gpu-1"]


def test_a_driver_restart_keeps_running_pods_confined_and_unprepares_them_later(
        k8s_api, k8s_node, k8s_namespace, driver, agent, probe_image, sim) -> None:
    tpl = template(k8s_api, k8s_namespace, "gpu-700m", memory="700Mi", cores="0")
    core(k8s_api).create_namespaced_pod(k8s_namespace, claim_pod(
        "holder", k8s_node.name, probe_image, tpl,
        ["/app/probe", str(300 * MIB), str(600 * MIB), "hold"], sim))
    wait_pod_phase(k8s_api, k8s_namespace, "holder", phases=("Running",), timeout=120)
    (c,) = claims(k8s_api, k8s_namespace)
    region = driver.regions / "claims" / f"{c['metadata']['uid']}_gpu" / "vgpu.region"

    def holding() -> bool:
        with Region.open(region) as r:
            return r.snapshot().devices[0].used_bytes >= 300 * MIB

    wait_for(holding, 60, "the holder's allocation counted in its claim's region")
    # the agent adopts the claim's container with its region and the claim's 700 MiB as limit
    adopted = wait_for(lambda: audit_event(agent, lambda e: e.get("event") == "workload_adopted"
                                           and e["workload"]["pod"] == "holder"
                                           and e["workload"]["namespace"] == k8s_namespace), 60,
                       "the agent adopting the holder's container")
    assert (adopted["region"], adopted["region_error"]) == (str(region), None), adopted
    assert list(adopted["limits_bytes"].values()) == [700 * MIB], adopted
    assert driver.stop() == 0
    driver.start()
    wait_for(lambda: "serving" in driver.text().rsplit("stopped", 1)[-1], 60,
             "the restarted driver serving")
    with Region.open(region) as r:
        d = r.snapshot().devices[0]
    assert d.limit_bytes == 700 * MIB and d.used_bytes >= 300 * MIB
    assert core(k8s_api).read_namespaced_pod("holder", k8s_namespace).status.phase == "Running"
    # the restarted driver unprepares what its predecessor prepared (from the checkpoint)
    core(k8s_api).delete_namespaced_pod("holder", k8s_namespace, grace_period_seconds=0)
    wait_for(lambda: not region.parent.exists(), 90, "the claim unprepared after the restart")


KILL_POLICY = """version 1

defaults {
  gpumem = 1GiB
  on_violation = kill after 0s alert "SliceViolation" severity critical
  bypass_tolerance = 768MiB
}
"""


@pytest.mark.bpf
def test_a_process_allocating_around_libvgpu_in_a_claim_is_killed_at_its_slice(
        k8s_api, k8s_node, k8s_namespace, driver, sim, tmp_path) -> None:
    """The agent (eBPF on) judges a DRA container by its claim: 640 MiB through the shim, then
    960 MiB around it on a 1 GiB claim, and the allocation that passes the slice never
    returns."""
    exe = compile_c(AROUND_C, tmp_path, name="alloc_around_shim")
    image = k8s_node.import_image(images.build_image(
        tmp_path / "img", "gpuwarden.test/dra-around:1", {"/app/around": exe}))
    (tmp_path / "policy.gwp").write_text(KILL_POLICY)
    state = tmp_path / "agent"
    err = (tmp_path / "agent.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden", "agent", "--kubernetes", "--node", k8s_node.name,
         "--kubeconfig", str(k8s_node.cp.admin_kubeconfig), "--regions-root",
         str(driver.regions), "--state-dir", str(state), "--policy",
         str(tmp_path / "policy.gwp"), "--metrics-port", "0", "--quiet"],
        env=sim, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
    try:
        wait_for(lambda: "ready;" in (tmp_path / "agent.log").read_text()
                 or proc.poll() is not None, 90, "the agent (eBPF) starting")
        assert proc.poll() is None, (tmp_path / "agent.log").read_text()
        tpl = template(k8s_api, k8s_namespace, "gpu-1g", memory="1Gi", cores="0")
        core(k8s_api).create_namespaced_pod(k8s_namespace, claim_pod(
            "around", k8s_node.name, image, tpl,
            ["sh", "-c", "sleep 2; exec /app/around 640 960 5000"], sim))
        done = wait_pod_phase(k8s_api, k8s_namespace, "around", timeout=120)
        out = k8s_node.container_log(done)
        term = done.status.container_statuses[0].state.terminated
        assert term.exit_code == 137 and "holding" not in out, (term, out)
        audit = state / "audit.jsonl"
        kk = wait_for(lambda: audit_event(audit, lambda e: e.get("action") == "kernel_kill"),
                      30, "the agent's audit record of the kill")
        assert kk["workload"]["pod"] == "around", kk
    finally:
        proc.terminate()
        proc.wait(15)
        err.close()


def test_sigterm_stops_the_driver_and_removes_its_sockets(k8s_node, driver) -> None:
    reg = k8s_node.kubelet_root / "plugins_registry" / "gpuwarden.io-reg.sock"
    assert reg.is_socket()
    assert driver.stop() == 0, driver.text()
    assert not reg.exists()
    # the slice was written after registrations (and a kubelet's wipe), never over and over
    # (the API server returns quantities in canonical form: 8192Mi as 8Gi)
    text = driver.text()
    assert text.count("published ResourceSlice") < text.count("registered with the kubelet") + 3

    assert driver.text().rstrip().endswith("stopped")
