"""The agent in cluster mode, in this process, over a scripted pod API, a fake NVML and a /proc
tree whose entries are real child processes with the cgroup and namespace pid a pod container
would give them. Proves: containers are adopted by cgroup and judged with the pod's rule; the
shim's namespace pids count as the shim's (no false bypass); a process that dropped the shim is
killed with an Event on its pod and a violation counted; a pod process the pod status does not
name yet is spared; a restart re-adopts without a false kill; a deleted pod ends its workload."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cluster import ClusterMode
from agent.daemon import Agent, AgentConfig
from agent.model import GpuUuid, WorkloadKey
from agent.procfs import start_time
from gpuwarden.informer import Informer, Listed
from libvgpu import region as lr

MIB = 1 << 20
GPU = "GPU-6a1b2c3d-0000-4000-8000-00000000abcd"
NODE = "gpu-node-1"
POLICY = """version 1
defaults {
  gpumem = 1GiB
  on_violation = kill after 0s alert "GpuSliceViolation" severity critical
  bypass_tolerance = 64MiB
}
unmanaged {
  gpumem = 0MiB
  on_violation = kill after 0s alert "UnmanagedGpuProcess" severity critical
}
rule "ml" {
  match namespace == "ml" and node_label pool == "a100"
  cap gpumem <= 2GiB
}
"""


class FakeNvml:
    """The few pynvml calls the sampler makes; `used` maps host pid -> bytes on the GPU."""

    NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED = 6, 3

    class NVMLError(Exception):
        value = 6

    def __init__(self) -> None:
        self.used: dict[int, int] = {}

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlDeviceGetCount(self): return 1
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetMemoryInfo(self, h):
        return type("M", (), {"total": 80 << 30, "used": sum(self.used.values())})()

    def nvmlDeviceGetUtilizationRates(self, h): return type("U", (), {"gpu": 0})()
    def nvmlDeviceGetUUID(self, h): return GPU
    def nvmlDeviceGetName(self, h): return "Simulated"

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [type("P", (), {"pid": p, "usedGpuMemory": b})()
                for p, b in self.used.items() if _alive(p)]

    def nvmlDeviceGetProcessUtilization(self, h, since):
        raise self.NVMLError()


def _alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return st.rpartition(")")[2].split()[0] not in ("Z", "X")


class World:
    """Pods in the API, container processes under a fixture /proc, regions on disk."""

    def __init__(self, tmp: Path) -> None:
        self.proc = tmp / "proc"
        self.proc.mkdir()
        self.regions = tmp / "containers"
        self.pods: dict[str, dict] = {}
        self.rv = 1
        self.nvml = FakeNvml()
        self.children: list[subprocess.Popen] = []

    # pods
    def pod(self, n: int, name: str, ns: str = "ml", running: bool = True) -> tuple[str, str]:
        uid = f"00000000-0000-4000-8000-{n:012d}"
        cid = f"{n:02d}" * 32
        pod = {"metadata": {"uid": uid, "name": name, "namespace": ns, "labels": {"app": name},
                            "resourceVersion": str(self.rv)},
               "spec": {"nodeName": NODE, "containers": [
                   {"name": "main", "resources": {"limits": {"nvidia.com/gpumem": "1500"}}}]},
               "status": {"phase": "Running", "containerStatuses": [
                   {"name": "main", "containerID": f"containerd://{cid}",
                    "state": {"running": {}} if running else {"waiting": {}}}]}}
        self.pods[uid] = pod
        return uid, cid

    # processes
    def process(self, uid: str, cid: str, ns_pid: int) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        self.children.append(child)
        d = self.proc / str(child.pid)
        d.mkdir()
        for f in ("stat", "environ"):
            (d / f).symlink_to(f"/proc/{child.pid}/{f}")
        (d / "cgroup").write_text(
            f"11:memory:/kubepods/burstable/pod{uid}/{cid}\n"
            f"4:pids:/kubepods/burstable/pod{uid}/{cid}\n")
        (d / "status").write_text(f"Name:\tpython\nNSpid:\t{child.pid}\t{ns_pid}\n")
        return child

    def region(self, uid: str, shim: dict[int, int], used: int) -> Path:
        """The region the device plugin prepared; `shim` maps namespace pid -> start time of
        the processes that run the shim."""
        path = self.regions / f"{uid}_main" / "vgpu.region"
        path.parent.mkdir(parents=True)
        lr.Region.create(path, [(GPU, 1500 * MIB)]).close()
        raw = bytearray(path.read_bytes())
        s = lr.RegionStruct.from_buffer(raw)
        s.devices[0].used_bytes = used
        for i, (pid, st) in enumerate(shim.items()):
            s.procs[i].pid, s.procs[i].start_time = pid, st
            s.procs[i].state = lr.PROC_ACTIVE
            s.procs[i].used_bytes[0] = used
        del s
        path.write_bytes(bytes(raw))
        return path

    def stop(self) -> None:
        for c in self.children:
            c.kill()
            c.wait()


class PodsApi:
    """gpuwarden.informer.ListWatch of the node's pods in the World."""

    def __init__(self, world: World) -> None:
        self.world = world

    def list(self):
        return Listed([json.loads(json.dumps(p)) for p in self.world.pods.values()],
                      str(self.world.rv))

    def watch(self, rv, timeout_s):
        time.sleep(0.05)  # nothing new: the server closes the watch, the informer resumes
        return iter(())


class NodeApi(PodsApi):
    def list(self):
        return Listed([{"metadata": {"name": NODE, "labels": {"pool": "a100"},
                                     "resourceVersion": "1"}}], "1")


class Events:
    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def put(self, body):
        self.bodies.append(body)

    def close(self):
        pass


@pytest.fixture
def world(tmp_path: Path):
    w = World(tmp_path)
    yield w
    w.stop()


def start_agent(tmp: Path, world: World, events: Events) -> Agent:
    (tmp / "policy").mkdir(exist_ok=True)
    (tmp / "policy" / "p.gwp").write_text(POLICY)
    cluster = ClusterMode(Informer("pods", PodsApi(world)), Informer("node", NodeApi(world)),
                          NODE, world.regions,
                          post_event=events, proc_root=world.proc, sync_timeout_s=10)
    cfg = AgentConfig(policy_paths=[str(tmp / "policy")], state_dir=tmp / "state",
                      ebpf=False, proc_root=str(world.proc), tick_seconds=0.1,
                      nvml_seconds=0.1, node=NODE, cluster=cluster)
    agent = Agent(cfg, nvml_lib=world.nvml)
    agent.start()
    return agent


def run_until(agent: Agent, cond, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent.step(max_wait=0.05)
        if cond():
            return
    raise AssertionError(f"did not happen within {timeout}s: {what}; rows {agent.view.rows}")


def audit(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "state" / "audit.jsonl").read_text().splitlines()]


def test_cluster_agent_end_to_end_in_process(tmp_path: Path, world: World) -> None:
    good_uid, good_cid = world.pod(1, "good")
    bad_uid, bad_cid = world.pod(2, "bad")
    late_uid, late_cid = world.pod(3, "late", running=False)  # status lags the container
    good = world.process(good_uid, good_cid, ns_pid=7)
    bad = world.process(bad_uid, bad_cid, ns_pid=9)
    late = world.process(late_uid, late_cid, ns_pid=4)
    world.region(good_uid, {7: start_time(good.pid)}, 500 * MIB)
    world.region(bad_uid, {}, 0)  # its process dropped the shim
    world.nvml.used = {good.pid: 500 * MIB, bad.pid: 300 * MIB, late.pid: 200 * MIB}
    events = Events()
    agent = start_agent(tmp_path, world, events)
    try:
        assert {t.key for t in agent.tracked.values()} == {
            WorkloadKey("ml", "good", "main"), WorkloadKey("ml", "bad", "main")}
        good_t = agent.tracked[f"{good_uid}_main"]
        assert good_t.rule.name == "ml"
        assert good_t.rule.memory_limit(GpuUuid(GPU)).bytes == 1500 * MIB
        assert agent.table.owner[good.pid] == f"{good_uid}_main"

        run_until(agent, lambda: bad.poll() is not None, what="the bypassing process is killed")
        run_until(agent, lambda: any(e["reason"] == "GpuwardenKilled" for e in events.bodies),
                  what="an Event on the pod")
        [ev] = [e for e in events.bodies if e["reason"] == "GpuwardenKilled"]
        assert ev["involvedObject"]["name"] == "bad" and ev["involvedObject"]["uid"] == bad_uid
        assert "bypass" in ev["message"] and "rule ml" in ev["message"]
        v = agent.view
        assert [n for vl, n in v.violations_total.items()
                if vl.key == WorkloadKey("ml", "bad", "main") and vl.gpu == GPU
                and vl.check == "bypass"] == [1]
        assert good.poll() is None, "the process running the shim was killed"
        assert late.poll() is None, "a pod process not named by its pod's status was killed"
        assert not [e for e in audit(tmp_path) if late.pid in e.get("pids", ())]
        # the pod's status catches up: the process is its container's
        world.pods[late_uid]["status"]["containerStatuses"][0]["state"] = {"running": {}}
        world.pods[late_uid]["metadata"]["resourceVersion"] = "2"  # as the API server does
        agent.cluster.pods.relist()
        run_until(agent, lambda: agent.table.owner.get(late.pid) == f"{late_uid}_main",
                  what="the late container's process is adopted")
        assert not [e for e in audit(tmp_path) if e.get("workload", {}).get("pod") == "good"
                    and e.get("event") in ("violation", "action")]
    finally:
        agent.close()

    # restart: the running pod is adopted again, nothing is judged against it
    n = len(audit(tmp_path))
    del world.pods[bad_uid]
    agent = start_agent(tmp_path, world, events)
    try:
        t_end = time.monotonic() + 1.5
        run_until(agent, lambda: time.monotonic() > t_end, what="1.5 s of loops")
        after = audit(tmp_path)[n:]
        assert sorted(e["workload"]["pod"] for e in after
                      if e["event"] == "workload_adopted") == ["good", "late"]
        assert not [e for e in after if e.get("workload", {}).get("pod") == "good"
                    and e.get("event") in ("violation", "action")]
        assert good.poll() is None
        assert agent.table.owner[good.pid] == f"{good_uid}_main"
        assert agent.tracked[f"{good_uid}_main"].shim_pids == {good.pid}

        del world.pods[good_uid]  # the pod is deleted: its workload ends
        agent.cluster.pods.relist()
        run_until(agent, lambda: f"{good_uid}_main" not in agent.tracked,
                  what="the deleted pod's workload ends")
    finally:
        agent.close()


def test_the_limit_metric_is_what_the_region_holds(tmp_path: Path, world: World) -> None:
    """gpuwarden_workload_memory_limit_bytes is the limit the shim enforces, read back from the
    region: it follows the device plugin writing another limit there, and a policy reload (the
    agent writes the new rule's limit). Before, it was the rule's limit whatever the region
    held."""
    from prometheus_client import CollectorRegistry

    from agent.exporter import AgentCollector

    uid, cid = world.pod(1, "good")
    proc = world.process(uid, cid, ns_pid=7)
    path = world.region(uid, {7: start_time(proc.pid)}, 100 * MIB)
    world.nvml.used = {proc.pid: 100 * MIB}
    agent = start_agent(tmp_path, world, Events())
    registry = CollectorRegistry()
    registry.register(AgentCollector(lambda: agent.view))
    labels = {"namespace": "ml", "pod": "good", "container": "main", "gpu_uuid": GPU}

    def exported() -> float | None:
        return registry.get_sample_value("gpuwarden_workload_memory_limit_bytes", labels)

    try:
        run_until(agent, lambda: exported() == 1500 * MIB, what="the region's limit exported")
        with lr.Region.open(path) as r:
            r.set_memory_limit(GPU, 700 * MIB)  # what the device plugin wrote, not the rule
        run_until(agent, lambda: exported() == 700 * MIB, what="the new region limit exported")
        assert agent.tracked[f"{uid}_main"].rule.memory_limit(GpuUuid(GPU)).bytes == 1500 * MIB
        (tmp_path / "policy" / "p.gwp").write_text(POLICY.replace("cap gpumem <= 2GiB",
                                                                  "cap gpumem <= 1GiB"))
        run_until(agent, lambda: exported() == 1024 * MIB, what="the reloaded rule's limit, "
                  "written into the region by the agent, exported")
        assert lr.Region.open(path).snapshot().device(GPU).limit_bytes == 1024 * MIB
    finally:
        agent.close()
