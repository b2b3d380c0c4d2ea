"""The whole agent in this process, its three machine-wide I/O edges replaced by fakes
(agent.edges): NVML, the eBPF probe and the netlink process events. No GPU, no BCC, no netlink
socket; the processes are real children of this test, read by the agent from the real /proc,
and the admission, the regions, the decisions and the signals are the agent's own.

The fakes share one simulated GPU: the probe's ledger is what was allocated on it, and NVML lists
the same bytes per process, as the driver would. The probe's "kernel" honours the kill limits
the agent arms: an allocation that would cross one kills the caller inside the call (SIGKILL)
and reports a killed event, as bpf/progs/audit.c does.

Proves: a process the agent hears forked from an admitted workload is attached to it; allocations
beyond the workload's limit, reported by eBPF, give a memory violation (NVML agreeing) and the
policy's action, a SIGTERM that ends the process; its exit ends the workload. A kill-without-grace
rule arms the probe's kill limit for each process of the workload, the kernel's kill is reported
as a kernel_kill action and the limit is cleared when the process exits. A restarted agent finds
the workload's process again by the GPUWARDEN_WORKLOAD marker in its environment. A worker that
ran the real libvgpu (on the simulated GPU, whose UUID the fake NVML then takes) and exec()s a
program without LD_PRELOAD is reported (shim_unloaded) and killed as a bypass although its slot
still lists it; one that exec()s with LD_PRELOAD kept is left alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import execafter
import pytest

from agent.daemon import Agent, AgentConfig
from agent.edges import EbpfProbe, NvmlLib, ProcEventSource
from agent.model import GpuUuid, Pid, WorkloadKey
from agent.procevents import ProcEvent

MIB = 1 << 20
GIB = 1 << 30
GPU = "GPU-1f2e3d4c-0000-4000-8000-00000000f00d"
GPU_TOTAL = 80 * GIB
POLICY = """version 1
defaults {
  gpumem = 1GiB
  on_violation = kill after 30s alert "GpuSliceViolation" severity critical
  bypass_tolerance = 64MiB
}
unmanaged {
  gpumem = 0MiB
  on_violation = alert "UnmanagedGpuProcess" severity warning
}
rule "strict" {
  match namespace == "strict"
  on_violation = kill after 0s alert "StrictViolation" severity critical
}
"""


class Wakeup:
    """A pipe that is readable while something waits: the fakes' fileno() for the loop's
    select(), as the ring buffer's epoll fd and the netlink socket are."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def ring(self) -> None:
        os.write(self.w, b"x")

    def drain(self) -> None:
        try:
            while os.read(self.r, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        for fd in (self.r, self.w):
            os.close(fd)


@dataclass(frozen=True)
class FakeEvent:
    """bpf.audit.AuditEvent as agent.edges.ProbeEvent reads it."""

    kind: str
    pid: int
    device: int
    bytes: int
    killed: bool = False


class FakeProbe:
    """agent.edges.EbpfProbe: the ledger {pid: {ordinal: bytes}}, the event stream and the kill
    limits, enforced the way the kernel program does."""

    def __init__(self) -> None:
        self.ledger: dict[int, dict[int, int]] = {}
        self.kill_limits: dict[int, int] = {}
        self.armed_ever: dict[int, int] = {}
        self.events: list[FakeEvent] = []
        self.closed = False
        self._wake = Wakeup()

    # what the simulated processes do
    def alloc(self, pid: int, n: int, ordinal: int = 0) -> None:
        held = sum(self.ledger.get(pid, {}).values())
        limit = self.kill_limits.get(pid)
        if limit is not None and held + n > limit:
            os.kill(pid, signal.SIGKILL)  # inside the call: nothing is accounted
            self.events.append(FakeEvent("mem_alloc", pid, ordinal, n, killed=True))
        else:
            per = self.ledger.setdefault(pid, {})
            per[ordinal] = per.get(ordinal, 0) + n
            self.events.append(FakeEvent("mem_alloc", pid, ordinal, n))
        self._wake.ring()

    def process_exec(self, pid: int) -> None:
        """The exec tracepoint clears the process's ledger too: the old image's driver state
        went with it."""
        self.ledger.pop(pid, None)

    def process_exited(self, pid: int) -> None:
        """The exit tracepoint clears the process's ledger."""
        self.ledger.pop(pid, None)
        self.events.append(FakeEvent("proc_clear", pid, -1, 0))
        self._wake.ring()

    # agent.edges.EbpfProbe
    def fileno(self) -> int:
        return self._wake.r

    def poll_events(self, timeout_ms: int = 0) -> Sequence[FakeEvent]:
        self._wake.drain()
        out, self.events = self.events, []
        return out

    def snapshot(self) -> Mapping[int, Mapping[int, int]]:
        return {p: dict(per) for p, per in self.ledger.items()}

    def rescan(self) -> object:
        return []

    def errors(self) -> Mapping[str, int]:
        return {"lost_event": 0, "queue_overflow": 0}

    def set_kill_limit(self, pid: int, max_bytes: int) -> None:
        self.kill_limits[pid] = max_bytes
        self.armed_ever[pid] = max_bytes

    def clear_kill_limit(self, pid: int) -> None:
        self.kill_limits.pop(pid, None)

    def close(self, *, exiting: bool = False) -> None:
        if not self.closed:
            self.closed = True
            self._wake.close()


class FakeNvml:
    """agent.edges.NvmlLib over the same GPU: each process's bytes are the probe's ledger."""

    NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED = 6, 3

    class NVMLError(Exception):
        value = 6

    def __init__(self, probe: FakeProbe, uuid: str = GPU) -> None:
        self.probe = probe
        self.uuid = uuid
        self.initialised = False

    def nvmlInit(self) -> object:
        self.initialised = True
        return None

    def nvmlShutdown(self) -> object:
        self.initialised = False
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> Any:
        used = sum(sum(per.values()) for per in self.probe.ledger.values())
        return type("Memory", (), {"total": GPU_TOTAL, "used": used})()

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Any:
        return type("Utilization", (), {"gpu": 0})()

    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes:
        return self.uuid.encode()

    def nvmlDeviceGetName(self, handle: object) -> str | bytes:
        return "Fake H100"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[Any]:
        return [type("Process", (), {"pid": p, "usedGpuMemory": sum(per.values())})()
                for p, per in self.probe.ledger.items() if sum(per.values())]

    def nvmlDeviceGetProcessUtilization(self, handle: object, last_seen: int) -> list[Any]:
        raise self.NVMLError()  # no sample since last_seen


class FakeProcEvents:
    """agent.edges.ProcEventSource: the fork, exec and exit events the netlink connector would
    send."""

    def __init__(self) -> None:
        self.queued: list[ProcEvent] = []
        self.closed = False
        self._wake = Wakeup()

    def fork(self, parent: int, child: int) -> None:
        self.queued.append(ProcEvent("fork", Pid(child), parent))
        self._wake.ring()

    def exit(self, pid: int) -> None:
        self.queued.append(ProcEvent("exit", Pid(pid)))
        self._wake.ring()

    def exec(self, pid: int) -> None:
        self.queued.append(ProcEvent("exec", Pid(pid)))
        self._wake.ring()

    def fileno(self) -> int:
        return self._wake.r

    def read(self) -> Sequence[ProcEvent]:
        self._wake.drain()
        out, self.queued = self.queued, []
        return out

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wake.close()


class Machine:
    """The fakes of one agent's life, and the processes this test starts."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        (tmp / "p.gwp").write_text(POLICY)
        self.children: list[subprocess.Popen[Any]] = []
        self.opened_libs: list[list[Path] | None] = []
        self.ebpf = True  # AgentConfig.ebpf: off, the probe is never opened
        self.tick = 0.1  # AgentConfig.tick_seconds
        self.gpu = GPU  # the UUID the fake NVML names its GPU by
        self.fresh_edges()

    def fresh_edges(self) -> None:
        self.probe = FakeProbe()
        self.nvml = FakeNvml(self.probe, self.gpu)
        self.procevents = FakeProcEvents()

    def open_probe(self, libs: list[Path] | None) -> EbpfProbe:
        self.opened_libs.append(libs)
        return self.probe

    def open_procevents(self) -> ProcEventSource:
        return self.procevents

    def agent(self) -> Agent:
        cfg = AgentConfig(policy_paths=[str(self.tmp / "p.gwp")], state_dir=self.tmp / "state",
                          tick_seconds=self.tick, nvml_seconds=0.1, ebpf=self.ebpf)
        nvml: NvmlLib = self.nvml
        agent = Agent(cfg, nvml_lib=nvml, open_ebpf=self.open_probe,
                      open_procevents=self.open_procevents)
        agent.start()
        return agent

    def process(self, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A real process that sleeps until signalled; `env` is added to this one's (without
        LD_PRELOAD: it runs no shim, as a process that dropped it)."""
        full = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        full.update({k: v for k, v in (env or {}).items() if k != "LD_PRELOAD"})
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 env=full)
        self.children.append(child)
        return child

    def audit(self) -> list[dict[str, Any]]:
        path = self.tmp / "state" / "audit.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self) -> None:
        for c in self.children:
            if c.poll() is None:
                c.kill()
            c.wait()


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    m = Machine(tmp_path)
    yield m
    m.stop()


def run_until(agent: Agent, cond: Callable[[], object], what: str,
              timeout: float = 15.0) -> None:
    """Drive the agent's loop until `cond()` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agent.step(max_wait=0.05)
        if cond():
            return
    raise AssertionError(f"not within {timeout}s: {what}; rows {agent.view.rows}")


def admit(agent: Agent, root: subprocess.Popen[bytes], namespace: str) -> dict[str, Any]:
    answer = agent.admit({"op": "admit", "name": "train", "namespace": namespace},
                         peer_pid=root.pid)
    assert answer["ok"], answer
    assert answer["devices"] == [GPU] and answer["limits_bytes"] == [GIB]
    return answer


def admit_and_fork(machine: Machine, agent: Agent, root: subprocess.Popen[bytes]
                   ) -> tuple[dict[str, Any], subprocess.Popen[bytes]]:
    """`root` admitted in namespace default, and a worker it forks (with the env the admission
    gave), once the agent attached it to the workload."""
    answer = admit(agent, root, "default")
    worker = machine.process(answer["env"])
    machine.procevents.fork(root.pid, worker.pid)
    run_until(agent, lambda: agent.table.owner.get(Pid(worker.pid)) == answer["wid"],
              "the forked process is attached to the workload")
    return answer, worker


def of(events: list[dict[str, Any]], wid: str, **match: object) -> list[dict[str, Any]]:
    return [e for e in events if e.get("workload", {}).get("id") == wid
            and all(e.get(k) == v for k, v in match.items())]


def test_a_forked_process_over_its_limit_is_terminated_and_its_exit_ends_the_workload(
        machine: Machine) -> None:
    agent = machine.agent()
    try:
        assert agent.sources.ebpf is machine.probe and agent.sources.nvml is not None
        assert agent.sources.procevents is machine.procevents
        assert machine.nvml.initialised and [d.uuid for d in agent.sources.devices] == [GPU]
        root = machine.process()  # the `gpuwarden run` that asked for admission
        answer, worker = admit_and_fork(machine, agent, root)
        wid = answer["wid"]

        run_until(agent, lambda: any(r.used == {"shim": 0, "ebpf": 0, "nvml": 0}
                                     for r in agent.view.rows if r.gpu == GPU),
                  "the workload judged with every source on, nothing allocated")
        assert root.poll() is None and worker.poll() is None
        assert not of(machine.audit(), wid, event="violation")

        machine.probe.alloc(worker.pid, 3 * GIB)  # beyond the 1 GiB limit, without the shim
        run_until(agent, lambda: worker.poll() is not None, "the worker is terminated")
        assert worker.returncode == -signal.SIGTERM
        events = machine.audit()
        [violation] = of(events, wid, event="violation", verdict="memory")
        assert violation["evidence"]["ebpf"] == 3 * GIB and violation["limit"] == GIB
        assert violation["detail"].startswith("memory above the limit by ebpf")
        assert violation["alert"] == "GpuSliceViolation" and violation["pids"] == sorted(
            [root.pid, worker.pid])
        [bypass] = of(events, wid, event="violation", verdict="bypass")
        assert bypass["detail"] == "1 process(es) on the GPU without the shim"
        [terminate] = of(events, wid, event="action", action="terminate")
        assert terminate["signal"] == "SIGTERM"
        assert terminate["results"] == {str(root.pid): "sent", str(worker.pid): "sent"}
        key = WorkloadKey("default", "train", agent.tracked[wid].rec.container)
        assert sum(n for labels, n in agent.view.violations_total.items()
                   if labels.key == key and labels.gpu == GpuUuid(GPU)
                   and labels.check == "memory") == 1
        assert agent.view.actions_total[(key, "terminate")] == 1

        root.wait(timeout=10)
        for p in (worker, root):  # the kernel's exit events, and its ledger cleared
            machine.probe.process_exited(p.pid)
            machine.procevents.exit(p.pid)
        run_until(agent, lambda: wid not in agent.tracked, "the workload ends")
        [ended] = of(machine.audit(), wid, event="workload_exited")
        assert ended["why"] == "all processes exited"
        records, errors = agent.ledger.load_all()
        assert records == [] and errors == []
    finally:
        agent.close()
    assert machine.probe.closed and machine.procevents.closed
    assert not machine.nvml.initialised


def test_kill_without_grace_arms_the_probe_and_the_kernel_kill_is_reported(
        machine: Machine) -> None:
    agent = machine.agent()
    try:
        root = machine.process()
        answer = admit(agent, root, "strict")
        wid = answer["wid"]
        armed = GIB + 64 * MIB  # the limit plus eBPF's slack
        run_until(agent, lambda: machine.probe.kill_limits.get(root.pid) == armed,
                  "the admitted process is armed")
        worker = machine.process(answer["env"])
        machine.procevents.fork(root.pid, worker.pid)
        run_until(agent, lambda: machine.probe.kill_limits.get(worker.pid) == armed,
                  "the forked process is armed")

        machine.probe.alloc(worker.pid, 2 * GIB)  # crosses the limit: killed in the call
        run_until(agent, lambda: of(machine.audit(), wid, action="kernel_kill"),
                  "the kernel's kill is reported")
        assert worker.wait(timeout=10) == -signal.SIGKILL
        [kk] = of(machine.audit(), wid, action="kernel_kill")
        assert kk["pids"] == [worker.pid] and kk["limit_bytes"] == armed
        assert kk["bytes"] == 2 * GIB and kk["rule"] == "strict"
        key = WorkloadKey("strict", "train", agent.tracked[wid].rec.container)
        assert agent.view.actions_total[(key, "kernel_kill")] == 1

        machine.probe.process_exited(worker.pid)
        machine.procevents.exit(worker.pid)
        run_until(agent, lambda: worker.pid not in machine.probe.kill_limits,
                  "the exited process's kill limit is cleared")
        assert machine.probe.kill_limits == {root.pid: armed}
        assert root.poll() is None, "the workload's other process was signalled"
        assert not of(machine.audit(), wid, event="action", action="kill")
        assert agent.table.pids_of(wid) == {root.pid}
    finally:
        agent.close()


def test_a_restarted_agent_finds_the_process_by_its_workload_marker(machine: Machine) -> None:
    agent = machine.agent()
    try:
        root = machine.process()
        answer, worker = admit_and_fork(machine, agent, root)
        wid = answer["wid"]
    finally:
        agent.close()
    root.kill()  # while no agent runs: only the marker can tell whose the worker is
    root.wait()

    machine.fresh_edges()
    agent = machine.agent()
    try:
        assert set(agent.tracked) == {wid}
        assert agent.table.pids_of(wid) == {worker.pid}
        [restored] = of(machine.audit(), wid, event="workload_restored")
        assert restored["pids"] == [worker.pid]
        machine.probe.alloc(worker.pid, 3 * GIB)  # and it is judged as the workload's
        run_until(agent, lambda: worker.poll() is not None, "the worker is terminated")
        assert worker.returncode == -signal.SIGTERM
    finally:
        agent.close()


def corrupt(region: Path) -> None:
    with region.open("r+b") as f:
        f.write(b"\0" * 8)  # the magic: as a workload may, through its mapping of the region


def test_without_ebpf_a_region_header_its_workload_overwrote_is_noticed_between_ticks(
        machine: Machine) -> None:
    """Without eBPF the loop watches the regions' totals between ticks (every 50 ms). A header
    the workload overwrote makes the next tick come at once (not the next periodic one, 60 s
    away here), which reports it; the loop runs on, the workload judged without the shim."""
    machine.ebpf, machine.tick = False, 60.0
    agent = machine.agent()
    try:
        assert agent.sources.ebpf is None and machine.opened_libs == []
        root = machine.process()
        answer = admit(agent, root, "default")
        wid = answer["wid"]
        run_until(agent, lambda: agent.view.rows, "the workload is judged")
        corrupt(Path(answer["env"]["CUDA_DEVICE_MEMORY_SHARED_CACHE"]))
        run_until(agent, lambda: agent.view.region_errors_total == 1,
                  "the overwritten header is reported", timeout=10)
        [err] = of(machine.audit(), wid, event="region_error")
        assert "corrupt region: bad magic 0x0" in err["error"]
        assert err["handling"].startswith("memory judged by eBPF/NVML")
        assert wid in agent.tracked and agent.tracked[wid].reader is None
        assert agent.table.pids_of(wid) == {root.pid} and root.poll() is None
    finally:
        agent.close()


def test_a_dead_process_slot_in_an_overwritten_region_is_reported_not_fatal(
        machine: Machine) -> None:
    """A process of the workload exits in the loop that finds its region's header overwritten:
    the slot reclaim reports it, the tick reports the region, the workload lives on."""
    agent = machine.agent()
    try:
        root = machine.process()
        answer, worker = admit_and_fork(machine, agent, root)
        wid = answer["wid"]
        region = Path(answer["env"]["CUDA_DEVICE_MEMORY_SHARED_CACHE"])
        corrupt(region)
        worker.kill()
        worker.wait()
        machine.procevents.exit(worker.pid)
        agent.step(max_wait=0.05)  # the exit is read before the tick that reads the region
        errors = of(machine.audit(), wid, event="region_error")
        [reclaim] = [e for e in errors if "handling" not in e]
        assert reclaim["error"].startswith(
            f"cannot reclaim a dead process's slot: {region}: corrupt region: magic 0x0")
        run_until(agent, lambda: agent.view.region_errors_total == 1,
                  "the tick reports the region it cannot open again")
        assert agent.table.pids_of(wid) == {root.pid} and root.poll() is None
        assert wid in agent.tracked
    finally:
        agent.close()


def shim_slot(region: Path, pid: int, used: int) -> None:
    """What libvgpu does in a process of the workload: claim a slot (pid, start time) and count
    `used` bytes in it and in the device's total; `used` 0 releases the slot, as its atexit
    handler (vgpu_at_exit) does while the process's context still holds its memory."""
    from agent.procfs import start_time
    from libvgpu import region as lr

    with lr.Region.open(region) as r:
        s = lr.RegionStruct.from_buffer(r._mm)  # test-only poke at the mapping
        slot, dev = s.procs[0], s.devices[0]
        if used:
            slot.pid, slot.start_time = pid, start_time(pid) or 0
            slot.used_bytes[0] = used
            slot.state = lr.PROC_ACTIVE
            dev.used_bytes = used
        else:
            dev.used_bytes, slot.used_bytes[0] = 0, 0
            slot.pid, slot.start_time, slot.state = 0, 0, lr.PROC_FREE
        del s, slot, dev


def test_a_process_that_released_its_slot_on_its_way_out_is_not_a_bypass(
        machine: Machine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's flake on an H100 (the innocent "within" workload terminated as a bypass, shim
    0, eBPF 256 MiB, NVML 774 MiB): libvgpu releases a process's slot in an atexit handler, and
    the process still holds its memory (PyTorch frees nothing; the context goes at exit) through
    the library destructors and the driver's teardown that follow. A slot read in that window
    found a process of the workload on the GPU that the shim does not list. Such a process is
    leaving, not bypassing: no verdict while it exits; one that stays on the GPU past the grace
    without its slot is a bypass again."""
    from agent import workloads

    EXIT_GRACE = 4.0  # a short one for the test (past a 2 s slot period)
    monkeypatch.setattr(workloads, "EXIT_GRACE", EXIT_GRACE)
    agent = machine.agent()
    try:
        root = machine.process()
        answer = admit(agent, root, "default")
        wid = answer["wid"]
        region = Path(answer["env"]["CUDA_DEVICE_MEMORY_SHARED_CACHE"])
        shim_slot(region, root.pid, 256 * MIB)
        machine.probe.alloc(root.pid, 256 * MIB)
        run_until(agent, lambda: agent.tracked[wid].shim_pids == {root.pid}
                  and any(r.used == {"shim": 256 * MIB, "ebpf": 256 * MIB, "nvml": 256 * MIB}
                          for r in agent.view.rows), "the shim's process is seen")

        shim_slot(region, root.pid, 0)  # atexit: the slot goes, the memory stays for now
        left = time.monotonic()
        run_until(agent, lambda: not agent.tracked[wid].shim_pids,
                  "the slot read finds the slot released")
        while time.monotonic() < left + 3.0:  # past a slot period
            agent.step(max_wait=0.05)
        assert root.poll() is None, "the exiting process was signalled"
        assert not of(machine.audit(), wid, event="violation")

        run_until(agent, lambda: root.poll() is not None,
                  "still on the GPU without its slot past the grace: a bypass",
                  timeout=EXIT_GRACE + 5)
        [bypass] = of(machine.audit(), wid, event="violation", verdict="bypass")
        assert time.monotonic() - left >= EXIT_GRACE
        assert bypass["detail"] == "1 process(es) on the GPU without the shim"
    finally:
        agent.close()


def on_the_sim_gpu(machine: Machine, sim_env: Mapping[str, str]) -> Agent:
    """An agent whose fake NVML names its GPU by the simulated GPU's UUID, the one the shim
    registers in the region: the shim's count, eBPF's and NVML's are of the same GPU."""
    code = ("import pynvml; pynvml.nvmlInit(); "
            "print(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)))")
    machine.gpu = subprocess.run([sys.executable, "-c", code], env=dict(sim_env), text=True,
                                 capture_output=True, check=True).stdout.strip()
    assert machine.gpu.startswith("GPU-") and machine.gpu != GPU
    machine.fresh_edges()
    return machine.agent()


def exec_after_the_shim(machine: Machine, agent: Agent, sim_env: Mapping[str, str],
                        preload: str) -> tuple[str, subprocess.Popen[str]]:
    """A workload (namespace strict: kill at once) whose worker ran the shim and then exec()ed
    with LD_PRELOAD `preload` ("drop" or "keep"); returns once the new program runs and the
    agent has looked at the worker's maps twice since (agent.shimcheck)."""
    from libvgpu.paths import SHIM_NAME

    root = machine.process()
    answer = agent.admit({"op": "admit", "name": "train", "namespace": "strict"},
                         peer_pid=root.pid)
    assert answer["ok"] and answer["devices"] == [machine.gpu], answer
    wid = answer["wid"]
    worker = subprocess.Popen(execafter.argv(64 << 20, preload, "stdin", sys.executable, "-c",
                                             "print('exec', flush=True); import time; "
                                             "time.sleep(300)"),
                              env={**sim_env, **answer["env"]}, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    machine.children.append(worker)
    assert worker.stdout is not None and worker.stdin is not None
    assert worker.stdout.readline() == "allocated\n"
    machine.procevents.fork(root.pid, worker.pid)
    machine.probe.alloc(worker.pid, 64 * MIB)  # what the driver holds for it
    run_until(agent, lambda: worker.pid in agent.tracked[wid].shim_pids,
              "the shim's slot lists the worker")
    assert SHIM_NAME in Path(f"/proc/{worker.pid}/maps").read_text(), "not the real shim"

    worker.stdin.write("go\n")
    worker.stdin.flush()
    assert worker.stdout.readline() == "exec\n"  # the new program runs: its libraries mapped
    machine.probe.process_exec(worker.pid)
    machine.procevents.exec(worker.pid)  # the agent looks at its maps again after it
    machine.probe.alloc(worker.pid, 16 * MIB)  # the new program uses the GPU
    t = agent.tracked[wid]
    for which in ("a first", "a second"):  # each look moves maps_next on by SLOTS_PERIOD
        was = t.maps_next
        run_until(agent, lambda: worker.poll() is not None or t.maps_next > was,  # noqa: B023
                  f"{which} look at the worker's maps after its exec")
    return wid, worker


def test_a_process_that_execs_without_the_shim_is_a_bypass(
        machine: Machine, sim_gpu: Any) -> None:
    """`env -u LD_PRELOAD exec ...` in a process that ran the shim: the same pid and start time,
    so its slot still lists it, but nothing in it enforces the limits any more. The agent sees
    that libvgpu.so is no longer mapped in it, reports it, and the bypass check kills it."""
    agent = on_the_sim_gpu(machine, sim_gpu.env)
    try:
        wid, worker = exec_after_the_shim(machine, agent, sim_gpu.env, "drop")
        run_until(agent, lambda: worker.poll() is not None, "the worker is killed")
        assert worker.returncode == -signal.SIGKILL
        events = machine.audit()
        [unloaded] = of(events, wid, event="shim_unloaded")
        assert unloaded["pid"] == worker.pid
        [bypass] = of(events, wid, event="violation", verdict="bypass")
        assert bypass["detail"] == "1 process(es) on the GPU without the shim"
        assert events.index(unloaded) < events.index(bypass)
    finally:
        agent.close()


def test_a_process_that_execs_with_the_shim_again_is_still_the_shim_s(
        machine: Machine, sim_gpu: Any) -> None:
    agent = on_the_sim_gpu(machine, sim_gpu.env)
    try:
        wid, worker = exec_after_the_shim(machine, agent, sim_gpu.env, "keep")
        assert worker.poll() is None, "a process that runs the shim was signalled"
        assert "libvgpu.so" in Path(f"/proc/{worker.pid}/maps").read_text()
        assert worker.pid in agent.tracked[wid].shim_pids
        events = machine.audit()
        assert not of(events, wid, event="shim_unloaded")
        assert not of(events, wid, event="violation")
    finally:
        agent.close()
