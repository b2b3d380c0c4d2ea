"""The agent's main loop: wires the I/O edges (policy watcher, process events, regions, NVML,
eBPF, control socket, exporter) around the pure core (agent.decide).

One thread runs the loop and owns the eBPF probe; the control socket's threads only admit
workloads and read status, under the same lock.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from agent.audit import AuditLog
from agent.decide import AgentPolicy, core_plan, decide, judge, remember
from agent.enforce import Enforcer
from agent.exporter import GpuRow, Row, View
from agent.gpumap import ebpf_by_uuid, visible_gpus
from agent.ledger import Ledger, WorkloadRecord, safe_id
from agent.model import (
    GpuUuid,
    Mode,
    Pid,
    Rule,
    Snapshot,
    VerdictKind,
    Workload,
    WorkloadKey,
)
from agent.procfs import MARKER_ENV, environ_values, read_proc, running, scan, start_time
from agent.proctree import ProcessTable
from agent.reload import PolicyWatcher, ReloadThread
from agent.rules import to_rule
from gpuwarden.annotations import (
    ContainerAssignment,
    DeviceGrant,
    GpuDevice,
    NodeInventory,
    PodAssignment,
)
from gpuwarden.placement import ContainerRequest, Misfit, NodeState, PodRequest, fit, node_usage
from gpuwarden.resources import DEVICE_SPLIT_COUNT
from policy.model import MIB

__all__ = ["Agent", "AgentConfig"]


@dataclass
class AgentConfig:
    policy_paths: list[str]
    state_dir: Path
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    dry_run: bool = False
    audit_unmanaged: bool = False  # processes no workload owns: record would_*, never signal
    protect: list[str] = field(default_factory=list)  # PIDs or process names
    tick_seconds: float = 1.0  # full loop when no event asks for one earlier
    nvml_seconds: float = 1.0
    rescan_seconds: float = 60.0  # look for new libcuda files (also after each admission)
    ebpf: bool = True
    libcuda: list[Path] | None = None
    proc_root: str = "/proc"
    audit_stream: TextIO | None = None
    node: str = field(default_factory=socket.gethostname)
    cluster: Any = None  # agent.cluster.ClusterMode: workloads are this node's pod containers


@dataclass
class Tracked:
    rec: WorkloadRecord
    key: WorkloadKey
    rule: Rule
    reader: Any = None  # agent.regions.RegionReader
    region_error: str = ""
    region_retry: float = 0.0
    used: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int | None] = field(default_factory=dict)
    shim_pids: frozenset[Pid] = frozenset()
    plan_written: dict[str, tuple[int, str]] = field(default_factory=dict)
    procs: dict[int, int] = field(default_factory=dict)  # the region's slots last read
    procs_next: float = 0.0


def ring_fd(probe: Any) -> int | None:
    """A file descriptor that becomes readable when the probe's ring buffer has events; None
    when the probe offers none (the loop then drains the ring buffer every EBPF_BATCH s)."""
    try:
        return int(probe.fileno())
    except Exception:
        return None


class Agent:
    def __init__(self, cfg: AgentConfig, nvml_lib: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self._nvml_lib = nvml_lib
        self.clock = clock
        self.lock = threading.RLock()
        self.ledger = Ledger(cfg.state_dir)
        self.watcher = PolicyWatcher(cfg.policy_paths)
        self.reloader: ReloadThread | None = None
        self.table = ProcessTable()
        self.tracked: dict[str, Tracked] = {}
        self.history: dict[Any, Any] = {}
        self.devices: list[Any] = []
        self.nvml: Any = None
        self.nvml_reason = "not started"
        self.nvml_sample: Any = None
        self._nvml_next = 0.0
        self.ebpf: Any = None
        self.ebpf_reason = "disabled (--no-ebpf)" if not cfg.ebpf else "not started"
        self._env_gpus: dict[tuple[int, int], list[str] | None] = {}
        self.procevents: Any = None
        self.region_errors_total = 0
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._dirty = True
        self._ebpf_counters = (0, 0)
        self._ring_fd: int | None = None
        self._ring_quiet_until = 0.0
        self._last_snap: Snapshot | None = None
        self._last_pol: AgentPolicy | None = None
        self._next_occupancy = 0.0
        self._alerted_bypass: set[str] = set()
        self._ebpf_counters_next = 0.0
        self._last_tick = 0.0
        self._next_tick = 0.0
        self._next_verify = 0.0
        self._next_rescan = 0.0
        self._last_rescan_req = -1e9
        self._published: tuple[Snapshot | None, list[Any] | None, float] = (None, None, 0.0)
        self._view_cache: View | None = None
        self.audit: AuditLog | None = None
        self.enforcer: Enforcer | None = None
        self.stopping = threading.Event()
        self.cluster = cfg.cluster
        self._by_container: dict[str, str] = {}  # container id -> wid (cluster mode)
        self._bad_pods_told: set[str] = set()  # unreadable pods already reported
        self._next_adopt = 0.0
        self.loop_seconds = 0.0
        self.kill_latency: list[float] = []

    # ---- start-up ---------------------------------------------------------------------------

    def start(self) -> None:
        """Take the state folder (raises agent.ledger.AgentAlreadyRunning), load the policy
        (raises agent.reload.PolicyError), open every source, restore."""
        self.ledger.lock()
        try:
            self.watcher.load_initial()
        except BaseException:
            self.ledger.unlock()
            raise
        self.reloader = ReloadThread(self.watcher, self.wake)
        self.reloader.start()
        self.audit = AuditLog(self.ledger.audit_path, self.cfg.audit_stream)
        self._open_nvml()
        self._open_ebpf()
        self.enforcer = Enforcer(self.audit, self.table.start.get, self.ebpf,
                                 self.cfg.proc_root)
        self._open_procevents()
        self._restore()
        if self.cluster is not None:
            self.audit.listeners.append(self.cluster.on_audit)
            if not self.cluster.start(self.wake):
                self._emit({"event": "pod_watch_not_synced", "handling": "processes in pod "
                            "containers are spared until the node's pods are listed"})
            self._sync_pods()
        self.audit.emit({"event": "agent_started", "policy_digest": self.watcher.digest,
                         "ebpf": "on" if self.ebpf else f"off: {self.ebpf_reason}",
                         "nvml": "on" if self.nvml else f"off: {self.nvml_reason}",
                         "devices": [d.uuid for d in self.devices],
                         "workloads_restored": len(self.tracked),
                         "dry_run": self.cfg.dry_run})
        self._publish()

    def _open_nvml(self) -> None:
        from agent.nvml import NvmlSampler

        try:
            sampler = NvmlSampler(self._nvml_lib)
            self.devices = sampler.open()
            self.nvml = sampler
            self.nvml_reason = ""
        except Exception as err:  # no driver, no GPU: the agent runs on without NVML
            self.nvml_reason = f"{type(err).__name__}: {err}"

    def _ebpf_libs(self) -> list[Path] | None:
        if self.cfg.libcuda is not None:
            return self.cfg.libcuda
        if os.environ.get("GPUWARDEN_SIM_STATE"):
            with contextlib.suppress(Exception):
                from libvgpu.paths import sim_lib_dir

                return [(sim_lib_dir() / "libcuda.so.1").resolve()]
        return None

    def _open_ebpf(self) -> None:
        if not self.cfg.ebpf:
            return
        try:
            from bpf.audit import AuditProbe

            self.ebpf = AuditProbe(libs=self._ebpf_libs(), launch_counters=False).start()
            self.ebpf_reason = ""
            self._ring_fd = ring_fd(self.ebpf)
            from agent.memtrim import trim_after_compile

            trim_after_compile()  # the compiler's memory is not needed any more
        except Exception as err:
            self.ebpf = None
            first = err.args[0] if err.args else None
            msg = "; ".join(map(str, first)) if isinstance(first, list) else str(err)
            if os.geteuid() != 0:
                msg = f"not running as root ({msg})"
            self.ebpf_reason = f"{type(err).__name__}: {msg}"

    def _open_procevents(self) -> None:
        from agent.procevents import ProcEvents

        try:
            self.procevents = ProcEvents.open()
        except OSError as err:
            self.procevents = None
            print(f"gpuwarden agent: process events unavailable ({err}); polling /proc",
                  file=sys.stderr)

    def _rule_for(self, rec: WorkloadRecord) -> tuple[Any, Rule]:
        eff = self.watcher.policy.evaluate(rec.policy_workload(self.cfg.node))
        total = self._total_bytes(rec.devices)
        return eff, to_rule(eff, total)

    def _total_bytes(self, uuids: list[str]) -> int | None:
        for d in self.devices:
            if not uuids or d.uuid in uuids:
                return int(d.total_bytes)
        return None

    def _restore(self) -> None:
        records, errors = self.ledger.load_all()
        for e in errors:
            self._emit({"event": "ledger_error", "error": e})
        for rec in records:
            _, rule = self._rule_for(rec)
            t = Tracked(rec, WorkloadKey(rec.namespace, rec.name, rec.container), rule)
            self._open_region(t)
            self.tracked[rec.wid] = t
        procs = scan(self.cfg.proc_root)
        roots = {r.rec.wid: (Pid(r.rec.root_pid), r.rec.root_start)
                 for r in self.tracked.values()}
        self.table.rebuild(procs, self.tracked, roots)
        for t in list(self.tracked.values()):
            if t.reader is not None:
                with contextlib.suppress(Exception):
                    live = {p: st for p, st in t.reader.read().procs.items()
                            if p in procs and procs[Pid(p)].start_time == st}
                    for p, st in live.items():
                        self.table.attach(Pid(p), t.rec.wid, st)
            if not self.table.pids_of(t.rec.wid):
                self._end_workload(t.rec.wid, "no live process after restart")
            else:
                self._emit({"event": "workload_restored", "workload": self._wl(t),
                            "pids": sorted(self.table.pids_of(t.rec.wid)),
                            "region_error": t.region_error or None})

    def _open_region(self, t: Tracked) -> None:
        from agent.regions import RegionReader

        path = Path(t.rec.region)
        try:
            t.reader = RegionReader(path)
            if t.region_error:
                self._emit({"event": "region_recovered", "workload": self._wl(t)})
            t.region_error = ""
        except Exception as err:
            t.reader = None
            if not t.region_error:
                self.region_errors_total += 1
                self._emit({"event": "region_error", "workload": self._wl(t),
                            "error": str(err), "handling": "memory judged by eBPF/NVML "
                            "against the rule; no bypass verdict without the shim's view"})
            t.region_error = str(err)
            t.region_retry = self.clock() + 5.0

    # ---- admission (control socket) ---------------------------------------------------------

    def admit(self, req: dict[str, Any], peer_pid: int) -> dict[str, Any]:
        from libvgpu.paths import shim_path
        from libvgpu.region import Region

        try:
            name = str(req.get("name") or "workload")
            namespace = str(req.get("namespace") or "default")
            labels = {str(k): str(v) for k, v in dict(req.get("labels") or {}).items()}
            request = dict(req.get("request") or {})
        except (TypeError, ValueError) as err:
            return {"ok": False, "code": 2, "error": f"bad admission request: {err}"}
        with self.lock:
            rec = WorkloadRecord(wid="", namespace=namespace, name=name, labels=labels,
                                 request=request, created=time.time())
            try:
                eff, _ = self._rule_for(rec)
            except (TypeError, ValueError) as err:
                return {"ok": False, "code": 2, "error": f"bad resource request: {err}"}
            if eff.denied is not None:
                self._emit({"event": "admission_denied", "workload": {
                    "namespace": namespace, "pod": name}, "reason": eff.denied})
                return {"ok": False, "code": 1, "error": f"denied by policy: {eff.denied}",
                        "decided_by": eff.decided_by.get("denied", "")}
            if not self.devices:
                return {"ok": False, "code": 2, "error": "no GPU to run on: NVML is "
                        f"unavailable ({self.nvml_reason}); on a machine without a GPU start "
                        "the agent with the simulated GPU (gpuwarden sim env)"}
            placed = fit(self._admission_node(), PodRequest((ContainerRequest(rec.container,
                                                                            eff),)))
            if isinstance(placed, Misfit):
                self._emit({"event": "admission_refused", "workload": {
                    "namespace": namespace, "pod": name}, "reason": placed.reason})
                return {"ok": False, "code": 1, "error": "no GPU of this machine has room: "
                        + placed.reason.removeprefix("gpuwarden: ")}
            by_uuid = {d.uuid: d for d in self.devices}
            chosen = [by_uuid[g.uuid] for g in placed.assignment.containers[0].devices]
            rec.devices = [d.uuid for d in chosen]
            rec.wid = f"{safe_id(namespace)}.{safe_id(name)}-{secrets.token_hex(3)}"
            rec.region = str(self.ledger.region_path(rec.wid))
            limits = [eff.memory_limit_bytes(d.total_bytes) for d in chosen]
            try:
                shim = str(shim_path())
                with Region.create(rec.region, list(zip(rec.devices, limits, strict=True))) as r:
                    for d in chosen:
                        if eff.gpucores:
                            r.set_compute_limit(d.uuid, int(eff.gpucores))
            except Exception as err:
                return {"ok": False, "code": 2, "error": f"cannot prepare the workload: {err}"}
            rec.root_pid = peer_pid
            rec.root_start = start_time(peer_pid, self.cfg.proc_root) or 0
            self.ledger.save(rec)
            rule = to_rule(eff, chosen[0].total_bytes)
            t = Tracked(rec, WorkloadKey(namespace, name, rec.container), rule)
            self._open_region(t)
            self.tracked[rec.wid] = t
            self.table.attach(Pid(peer_pid), rec.wid, rec.root_start)
            env = self._env(rec, eff, limits, shim, len(chosen) < len(self.devices))
            self._emit({"event": "workload_admitted", "workload": self._wl(t),
                        "rule": rule.name, "limits_bytes": dict(zip(rec.devices, limits,
                                                                     strict=True)),
                        "gpucores": eff.gpucores, "priority": rule.priority,
                        "mode": rule.mode, "on_violation": eff.on_violation.describe(),
                        "pid": peer_pid})
            self._dirty = True
            # its libcuda may be a new file: look soon, but not more than every 5 s
            self._next_rescan = min(self._next_rescan, max(self._last_rescan_req + 5.0,
                                                           self.clock() + 1.0))
            self._last_rescan_req = self.clock()
        self.wake()
        return {"ok": True, "wid": rec.wid, "env": env, "rule": rule.name,
                "limits_bytes": limits, "devices": rec.devices,
                "on_violation": eff.on_violation.describe(), "mode": rule.mode}

    def _admission_node(self) -> NodeState:
        """This machine as the placement core sees it: its GPUs and what the admitted
        workloads hold (their limits under the current policy)."""
        devices = tuple(GpuDevice(d.uuid, d.index, d.total_bytes // MIB, 100, d.name)
                        for d in self.devices)
        held = []
        for t in self.tracked.values():
            eff, _ = self._rule_for(t.rec)
            grants = tuple(DeviceGrant(d.uuid, d.index, eff.memory_limit_bytes(d.total_bytes)
                                       // MIB, int(eff.gpucores))
                           for d in self.devices if d.uuid in t.rec.devices)
            held.append(PodAssignment(self.cfg.node, (ContainerAssignment(t.rec.container,
                                                                          grants),)))
        return NodeState(self.cfg.node, NodeInventory(devices, DEVICE_SPLIT_COUNT),
                         node_usage(held))

    def _env(self, rec: WorkloadRecord, eff: Any, limits: list[int], shim: str,
             subset: bool) -> dict[str, str]:
        pre = os.environ.get("LD_PRELOAD", "")
        env = {
            "LD_PRELOAD": f"{shim}:{pre}" if pre else shim,
            "CUDA_DEVICE_MEMORY_SHARED_CACHE": rec.region,
            "CUDA_DEVICE_MEMORY_LIMIT": str(limits[0]),
            "GPU_CORE_UTILIZATION_POLICY": str(eff.core_policy),
            "CUDA_TASK_PRIORITY": str(eff.priority),
            "ACTIVE_OOM_KILLER": "false",
            MARKER_ENV: rec.wid,
        }
        for i, lim in enumerate(limits):
            env[f"CUDA_DEVICE_MEMORY_LIMIT_{i}"] = str(lim)
        if eff.gpucores:
            env["CUDA_DEVICE_SM_LIMIT"] = str(int(eff.gpucores))
        if subset:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(rec.devices)
        return env

    # ---- the loop ---------------------------------------------------------------------------

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def run_forever(self) -> None:
        while not self.stopping.is_set():
            self.step()

    def step(self, max_wait: float | None = None) -> None:
        now = self.clock()
        wait = max(0.0, self._next_tick - now)
        if max_wait is not None:
            wait = min(wait, max_wait)
        if self._dirty:
            wait = max(0.0, self.MIN_TICK_GAP - (now - self._last_tick))
        fds: list[Any] = [self._wake_r]
        if self.procevents is not None:
            fds.append(self.procevents)
        if self.ebpf is not None:
            # Wake on the ring buffer's fd when there is one, but after a drain that found
            # events, wait EBPF_BATCH before listening to it again: at thousands of driver
            # calls a second, waking for each would cost more than judging them.
            ring = self._ring_fd
            if ring is None:
                wait = min(wait, self.EBPF_BATCH)
            elif now >= self._ring_quiet_until:
                fds.append(ring)
            else:
                wait = min(wait, self._ring_quiet_until - now)
            select.select(fds, [], [], wait)
            events = self.ebpf.poll_events(0)
            if events:
                self._ring_quiet_until = self.clock() + self.EBPF_BATCH
            for e in events:
                if e.killed:
                    self._kernel_killed(e)
                elif not self._dirty and e.kind != "proc_clear" and self._suspect(e.pid):
                    self._dirty = True
        else:
            # without eBPF nothing announces that a process started using a GPU: watch the
            # regions' totals (about 20 us each) so priority follows within 100 ms
            wait = min(wait, max(0.0, self._next_occupancy - now))
            select.select(fds, [], [], wait)
            if self.clock() >= self._next_occupancy:
                self._watch_occupancy()
        with contextlib.suppress(BlockingIOError):
            if os.read(self._wake_r, 4096):
                self._dirty = True
        self._process_events()
        if self.cluster is not None:
            if self.cluster.take_changed():
                self._sync_pods()
            elif self.clock() >= self._next_adopt:
                self._adopt_scan()
        now = self.clock()
        if (self._dirty and now - self._last_tick >= self.MIN_TICK_GAP) or now >= self._next_tick:
            self.tick(now)
        # reloads run on their own thread: a slow or stuck one never delays verdicts and kills
        outcome = self.reloader.take() if self.reloader is not None else None
        if outcome is not None:
            self._on_reload(outcome)

    OCCUPANCY_PERIOD = 0.05

    def _watch_occupancy(self) -> None:
        self._next_occupancy = self.clock() + self.OCCUPANCY_PERIOD
        with self.lock:
            for t in self.tracked.values():
                if t.reader is None:
                    continue
                try:
                    used = t.reader.read(with_procs=False).used
                except Exception:
                    self._dirty = True  # let the tick report it
                    continue
                if {u for u, b in used.items() if b} != {u for u, b in t.used.items() if b}:
                    self._dirty = True

    def _suspect(self, pid: int) -> bool:
        """Does a driver call by `pid` need a verdict now (rather than at the next tick)? Yes
        for a workload's process that the shim does not know: a bypass. Calls through the shim
        are already held to the limit by the shim; strangers are judged by NVML at the tick."""
        wid = self.table.owner.get(Pid(pid))
        if wid is None or wid in self._alerted_bypass:
            return False  # a stranger, or a bypass already seen: the next tick will do
        t = self.tracked.get(wid)
        return t is None or Pid(pid) not in t.shim_pids

    def _kernel_killed(self, e: Any) -> None:
        """The eBPF program killed a process inside the allocation that crossed its limit."""
        wid = self.table.owner.get(Pid(e.pid))
        t = self.tracked.get(wid or "")
        ev: dict[str, Any] = {"event": "action", "action": "kernel_kill", "pids": [e.pid],
                              "call": e.kind, "bytes": e.bytes, "device": e.device,
                              "limit_bytes": self.enforcer.armed.get(Pid(e.pid))
                              if self.enforcer else None}
        if t is not None:
            ev["workload"] = self._wl(t)
            ev["rule"] = t.rule.name
            if self.enforcer is not None:
                self.enforcer.actions[(t.key, "kernel_kill")] += 1
                self.enforcer.last_action[t.rec.wid] = "kernel_kill"
        self._emit(ev)

    def _process_events(self) -> None:
        if self.procevents is None:
            if self.clock() >= self._next_verify:
                self._poll_proc()
            return
        try:
            events = self.procevents.read()
        except OSError as err:  # ENOBUFS: the kernel dropped events; rescan
            self._emit({"event": "procevents_overrun", "error": str(err)})
            self._poll_proc()
            return
        with self.lock:
            for ev in events:
                if ev.kind == "fork":
                    if Pid(ev.parent) in self.table.owner:
                        st = start_time(ev.pid, self.cfg.proc_root)
                        if st is not None:
                            self.table.on_fork(Pid(ev.parent), ev.pid, st)
                            self._dirty = True
                elif ev.kind == "exit":
                    self._on_exit(ev.pid)
        if self.clock() >= self._next_verify:
            self._verify_pids()

    def _on_exit(self, pid: Pid) -> None:
        wid = self.table.on_exit(pid)
        if self.enforcer is not None:
            self.enforcer.forget(pid)
        if wid is not None:
            self._dirty = True
            t = self.tracked.get(wid)
            cluster = t is not None and bool(t.rec.pod_uid)
            if not self.table.pids_of(wid) and not cluster:  # a container lives on its pod
                self._end_workload(wid, "all processes exited")
                return
            if t is not None and t.reader is not None:
                # a crashed process must not stay counted against its workload's limit
                try:
                    n = (self._reclaim_cluster(t) if cluster else
                         t.reader.region.reclaim_dead() if pid in t.reader.read().procs else 0)
                except Exception as err:
                    self._emit({"event": "region_error", "workload": self._wl(t),
                                "error": f"cannot reclaim a dead process's slot: {err}"})
                else:
                    if n:
                        self._emit({"event": "region_reclaimed", "workload": self._wl(t),
                                    "pid": pid, "slots": n})

    def _verify_pids(self) -> None:
        """Safety net for lost exit events: every owned PID must still be the same process."""
        self._next_verify = self.clock() + 10.0
        with self.lock:
            for pid, st in list(self.table.start.items()):
                if start_time(pid, self.cfg.proc_root) != st:
                    self._on_exit(pid)

    def _poll_proc(self) -> None:
        """Without process events: attach children of owned processes, drop the dead."""
        self._next_verify = self.clock() + 0.5
        procs = scan(self.cfg.proc_root, with_marker=False)
        with self.lock:
            for pid in [p for p in self.table.owner if p not in procs]:
                self._on_exit(pid)
            changed = True
            while changed:
                changed = False
                for info in procs.values():
                    if info.pid not in self.table.owner and info.ppid in self.table.owner:
                        self.table.on_fork(info.ppid, info.pid, info.start_time)
                        changed = self._dirty = True

    def _end_workload(self, wid: str, why: str) -> None:
        t = self.tracked.pop(wid, None)
        self.table.drop_workload(wid)
        self.history = {k: v for k, v in self.history.items() if k[0] != wid}
        if t is not None and t.reader is not None:
            with contextlib.suppress(Exception):
                t.reader.close()
        self.ledger.remove(wid)  # before the event: whoever reads it finds the region gone
        if t is not None:
            self._emit({"event": "workload_exited", "workload": self._wl(t), "why": why,
                        "last_action": (self.enforcer.last_action.pop(wid, "")
                                        if self.enforcer else "")})

    def _protected(self) -> frozenset[Pid]:
        out = {Pid(os.getpid()), Pid(1)}
        if self.cluster is not None:
            out |= self._pending_pod_pids()
        names = set()
        for p in self.cfg.protect:
            if p.isdigit():
                out.add(Pid(int(p)))
            else:
                names.add(p)
        if names:
            gpu_pids: set[int] = set()
            for view in (self.nvml_sample.memory if self.nvml_sample else {},
                         self._ebpf_view or {}):
                gpu_pids.update(view)
            for pid in gpu_pids:
                info = read_proc(pid, self.cfg.proc_root, with_marker=False)
                if info is not None and info.comm in names:
                    out.add(Pid(pid))
        return frozenset(out)

    _ebpf_view: dict[Pid, dict[GpuUuid, int]] | None = None

    def _read_ebpf(self) -> dict[Pid, dict[GpuUuid, int]] | None:
        if self.ebpf is None:
            return None
        uuids = [d.uuid for d in self.devices]
        ledger = self.ebpf.snapshot()
        nvml = self.nvml_sample.memory if self.nvml_sample else {}
        nvml_gpus = {Pid(pid): [u for u in uuids if u in nvml.get(Pid(pid), {})]
                     for pid in ledger}
        return ebpf_by_uuid(ledger, uuids, nvml_gpus,
                            lambda pid: self._visible_gpus(pid, uuids))

    def _visible_gpus(self, pid: int, uuids: list[str]) -> list[str] | None:
        """The GPUs a process's environment at exec shows it (gpumap.visible_gpus), cached per
        process (pid and start time; a workload's start time is already known)."""
        start = self.table.start.get(Pid(pid)) or start_time(pid, self.cfg.proc_root)
        if start is None:
            return None
        cache = self._env_gpus
        key = (pid, start)
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            env = environ_values(pid, ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
                                 self.cfg.proc_root)
            cache[key] = visible_gpus(env.get("NVIDIA_VISIBLE_DEVICES"),
                                      env.get("CUDA_VISIBLE_DEVICES"), uuids)
        return cache[key]

    MIN_TICK_GAP = 0.02  # event-driven ticks: at most 50 a second
    EBPF_BATCH = 0.02

    def tick(self, now: float) -> None:
        t0 = time.perf_counter()
        self._dirty = False
        self._last_tick = now
        self._next_tick = now + self.cfg.tick_seconds
        with self.lock:
            if self.ebpf is not None and now >= self._next_rescan:
                self._next_rescan = now + self.cfg.rescan_seconds
                with contextlib.suppress(Exception):
                    self.ebpf.rescan()
            if self.nvml is not None and now >= self._nvml_next:
                # with eBPF on, NVML is the second opinion: sampled half as often
                self._nvml_next = now + self.cfg.nvml_seconds * (2 if self.ebpf else 1)
                try:
                    self.nvml_sample = self.nvml.sample()
                    self.nvml_reason = ""
                except Exception as err:
                    self.nvml_reason = f"sampling failed: {err}"
                    self.nvml_sample = None
            self._ebpf_view = self._read_ebpf()
            if self.cluster is not None:
                self._adopt_gpu_pids()
            workloads = tuple(self._workload(t, now) for t in list(self.tracked.values()))
            self._nvml_catch_up(workloads, now)
            unmanaged = to_rule(self.watcher.policy.unmanaged, self._total_bytes([]),
                                name="unmanaged")
            if self.cfg.audit_unmanaged:
                unmanaged = replace(unmanaged, mode=Mode.AUDIT)
            pol = AgentPolicy(unmanaged=unmanaged,
                              dry_run=self.cfg.dry_run, protected=self._protected())
            assert self.enforcer is not None
            nvml_memory = self.nvml_sample.memory if self.nvml_sample else None
            if nvml_memory:  # a sample up to 2 s old: drop processes that have exited since
                nvml_memory = {p: v for p, v in nvml_memory.items()
                               if running(p, self.cfg.proc_root)}
            snap = Snapshot(
                workloads=workloads, ebpf=self._ebpf_view,
                nvml_memory=nvml_memory,
                nvml_sm=self.nvml_sample.sm if self.nvml_sample else None,
                history=self.history, armed=dict(self.enforcer.armed),
                ebpf_can_kill=self.ebpf is not None)
            if self.ebpf is not None and now >= self._ebpf_counters_next:
                self._ebpf_counters_next = now + 1.0  # kernel map reads: once a second
                with contextlib.suppress(Exception):
                    errs = self.ebpf.errors()
                    self._ebpf_counters = (
                        errs["lost_event"] + errs["queue_overflow"],
                        sum(v for k, v in errs.items()
                            if k not in ("lost_event", "queue_overflow")))
            # Nothing going on and nothing changed since the last loop: the same inputs with
            # an empty history give no verdict and no action, so skip the judging.
            self.enforcer.prune((w.key for w in workloads), now)
            same = (not self.history and snap == self._last_snap and pol == self._last_pol)
            self._last_snap, self._last_pol = snap, pol
            if same:
                self.loop_seconds = time.perf_counter() - t0
                self._publish(snap, self._published[1] or [])
                return
            verdicts = judge(snap, pol)
            actions = decide(snap, pol, now, verdicts)
            if actions:
                self.enforcer.apply(actions, now)
            self.history = remember(snap, pol, actions, now, verdicts)
            self._alerted_bypass = {k[0] for k, o in self.history.items()
                                    if k[1] == VerdictKind.BYPASS and o.alerted}
            self._write_core_plan(snap)
            self.loop_seconds = time.perf_counter() - t0
            self._publish(snap, verdicts)

    NVML_CATCH_UP = 0.2  # seconds
    NVML_NEW_WORKLOAD = 5.0  # seconds after admission during which a workload is "new"

    def _nvml_catch_up(self, workloads: tuple[Workload, ...], now: float) -> None:
        """A new workload that holds memory by the shim or eBPF but is not in NVML's last
        sample (taken before it started, up to 2 s ago): sample NVML again in 0.2 s, so that
        its NVML figures do not read 0 for its first seconds."""
        if self.nvml is None or self.nvml_sample is None:
            return
        seen = self.nvml_sample.memory
        wall = time.time()
        for w in workloads:
            t = self.tracked.get(w.wid)
            if t is None or wall - t.rec.created > self.NVML_NEW_WORKLOAD:
                continue
            holds = any((w.shim_used or {}).values()) or any(
                any((self._ebpf_view or {}).get(p, {}).values()) for p in w.pids)
            if holds and not any(p in seen for p in w.pids):
                self._nvml_next = min(self._nvml_next, now + self.NVML_CATCH_UP)
                self._next_tick = min(self._next_tick, now + self.NVML_CATCH_UP)
                return

    def _workload(self, t: Tracked, now: float) -> Workload:
        if t.reader is None and now >= t.region_retry:
            self._open_region(t)
        if t.reader is not None:
            try:
                # the slot list costs more than the totals: read it every 2 s, and at once when
                # a process of the workload that the shim does not list is seen on the GPU
                pids = self.table.pids_of(t.rec.wid)
                unknown = pids - t.shim_pids
                seen = (self._ebpf_view or {}, self.nvml_sample.memory
                        if self.nvml_sample else {})
                with_procs = now >= t.procs_next or any(p in v for v in seen for p in unknown)
                r = t.reader.read(with_procs=with_procs)
                if not with_procs:
                    r = replace(r, procs=t.procs)
                else:
                    t.procs, t.procs_next = r.procs, now + 2.0
                t.used, t.limits = r.used, r.limits
                if t.rec.pod_uid:  # the shim's pids are of the container's namespace
                    alive = {Pid(p) for p in self._host_pids(t, r.procs)}
                else:
                    alive = {Pid(p) for p, st in r.procs.items()
                             if self.table.start.get(Pid(p)) == st
                             or start_time(p, self.cfg.proc_root) == st}
                    for p in alive - self.table.pids_of(t.rec.wid):
                        self.table.attach(p, t.rec.wid, r.procs[p])  # the shim says it's ours
                t.shim_pids = frozenset(alive)
            except Exception as err:
                with contextlib.suppress(Exception):
                    t.reader.close()
                t.reader = None
                t.region_error = ""
                self._open_region(t)
                if t.reader is None:
                    t.region_error = t.region_error or str(err)
        ok = t.reader is not None
        return Workload(wid=t.rec.wid, key=t.key, rule=t.rule,
                        pids=self.table.pids_of(t.rec.wid),
                        shim_used={GpuUuid(u): b for u, b in t.used.items()} if ok else None,
                        shim_pids=t.shim_pids if ok else frozenset(),
                        region_error=t.region_error)

    def _write_core_plan(self, snap: Snapshot) -> None:
        occ: dict[GpuUuid, list[Workload]] = {}
        for w in snap.workloads:
            t = self.tracked.get(w.wid)
            if t is None or t.reader is None:
                continue
            on = {GpuUuid(u) for u, b in t.used.items() if b > 0}
            for g in on:
                occ.setdefault(g, []).append(w)
        for (wid, gpu), plan in core_plan(occ).items():
            t = self.tracked[wid]
            want = (plan.effective_cores_percent, "yield" if plan.yield_to_high else "run")
            if t.plan_written.get(gpu) != want:
                try:
                    t.reader.region.set_compute_override(gpu, limit=want[0], yield_=want[1])
                    t.plan_written[gpu] = want
                except Exception as err:
                    self._emit({"event": "region_error", "workload": self._wl(t),
                                "error": f"cannot write the compute override: {err}"})

    def _on_reload(self, outcome: Any) -> None:
        self._emit({"event": "policy_reload", "ok": outcome.ok, "digest": outcome.digest,
                    "message": outcome.message})
        if not outcome.ok:
            self._publish()
            return
        with self.lock:
            for t in self.tracked.values():
                eff, rule = self._rule_for(t.rec)
                if rule != t.rule:
                    self._emit({"event": "rule_changed", "workload": self._wl(t),
                                "rule": rule.name, "memory_limit_bytes":
                                rule.memory_limit_bytes})
                    t.rule = rule
                    if t.reader is not None:
                        for d in self.devices:
                            if d.uuid in t.rec.devices:
                                with contextlib.suppress(Exception):
                                    t.reader.region.set_memory_limit(
                                        d.uuid, eff.memory_limit_bytes(d.total_bytes))
                                    t.reader.region.set_compute_limit(d.uuid,
                                                                      int(eff.gpucores))
            self._dirty = True

    # ---- cluster mode: the node's pod containers are the workloads ----------------------------

    ADOPT_PERIOD = 2.0  # look for processes in pod containers (exec'd ones have no owned parent)

    def _sync_pods(self) -> None:
        """Track every running GPU container of the node's pods, end those gone, and give each
        its processes by cgroup."""
        assert self.cluster is not None
        want = {w: pc for w, pc in self.cluster.desired().items() if pc.container_id}
        with self.lock:
            for uid, why in self.cluster.bad_pods.items():
                if uid not in self._bad_pods_told:
                    self._emit({"event": "pod_unreadable", "pod_uid": uid, "error": why})
            self._bad_pods_told = set(self.cluster.bad_pods)
            for wid, t in list(self.tracked.items()):
                pc = want.get(wid)
                if t.rec.pod_uid and (pc is None or pc.container_id != t.rec.container_id):
                    self._by_container.pop(t.rec.container_id, None)
                    self._end_workload(wid, "the container is not running any more")
            for wid, pc in want.items():
                if wid not in self.tracked:
                    self._track_pod_container(pc)
        self._adopt_scan()

    def _adopt_scan(self) -> None:
        """Processes of pod containers that no workload owns yet (exec'd into a container,
        started before its status named it): theirs now."""
        assert self.cluster is not None
        self._next_adopt = self.clock() + self.ADOPT_PERIOD
        with self.lock:
            for pid, st, ref in self.cluster.scan(self.table.owner):
                self._adopt(pid, st, ref)

    def _track_pod_container(self, pc: Any) -> None:
        from agent.cluster import record_of

        w = pc.workload
        rec = record_of(pc, time.time())
        _, rule = self._rule_for(rec)
        t = Tracked(rec, WorkloadKey(w.namespace, w.name, w.container), rule)
        self._open_region(t)
        if not rec.devices and t.reader is not None:
            with contextlib.suppress(Exception):
                rec.devices = sorted(t.reader.read(with_procs=False).limits)
        self.tracked[pc.wid] = t
        self._by_container[pc.container_id] = pc.wid
        self._dirty = True
        self._emit({"event": "workload_adopted", "workload": self._wl(t), "rule": rule.name,
                    "memory_limit_bytes": rule.memory_limit_bytes, "region": rec.region,
                    "region_error": t.region_error or None})

    def _adopt(self, pid: int, st: int, ref: Any) -> bool:
        wid = self._by_container.get(ref.container_id)
        if wid is None:
            return False
        assert self.cluster is not None
        self.cluster.resolved(pid)
        self.table.attach(Pid(pid), wid, st)
        self._dirty = True
        return True

    def _adopt_gpu_pids(self) -> None:
        """Processes on a GPU that no workload owns yet: in a pod container, they are its."""
        assert self.cluster is not None
        seen: set[int] = set(self._ebpf_view or {})
        if self.nvml_sample is not None:
            seen.update(self.nvml_sample.memory)
        for pid in seen - set(self.table.owner):
            st = start_time(pid, self.cfg.proc_root)
            ref = self.cluster.container(pid, st) if st is not None else None
            if ref is not None and st is not None:
                self._adopt(pid, st, ref)

    def _pending_pod_pids(self) -> set[Pid]:
        """Unowned GPU processes in pod containers that the pod cache cannot name yet."""
        assert self.cluster is not None
        now = self.clock()
        out: set[Pid] = set()
        seen: set[int] = set(self._ebpf_view or {})
        if self.nvml_sample is not None:
            seen.update(self.nvml_sample.memory)
        for pid in seen - set(self.table.owner):
            if (self.cluster.container(pid) is not None
                    and self.cluster.pending(pid, now)):
                out.add(Pid(pid))
        return out

    def _host_pids(self, t: Tracked, procs: dict[int, int]) -> set[int]:
        """The host pids of the shim's slots in a pod container's region."""
        from agent.pods import host_pids

        assert self.cluster is not None
        mine = {int(p): self.table.start[p] for p in self.table.pids_of(t.rec.wid)
                if p in self.table.start}
        return set(host_pids(procs, self.cluster.ns_pids(mine)))

    def _reclaim_cluster(self, t: Tracked) -> int:
        """Free the slots of dead processes of a pod container: alive means a live process of
        the container has that namespace pid and start time."""
        assert self.cluster is not None and t.reader is not None
        mine = {int(p): self.table.start[p] for p in self.table.pids_of(t.rec.wid)
                if p in self.table.start}
        live = set(self.cluster.ns_pids(mine).values())
        return int(t.reader.region.reclaim_dead(alive=lambda p, st: (p, st) in live))

    # ---- views ------------------------------------------------------------------------------

    def _wl(self, t: Tracked) -> dict[str, str]:
        return {"id": t.rec.wid, "namespace": t.key.namespace, "pod": t.key.pod,
                "container": t.key.container}

    def _emit(self, ev: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.emit(ev)

    def _publish(self, snap: Snapshot | None = None, verdicts: list[Any] | None = None) -> None:
        """Keep what the exporter and `top` need; the View itself is built when asked for."""
        self._published = (snap, verdicts, time.time())
        self._view_cache = None

    @property
    def view(self) -> View:
        with self.lock:
            if self._view_cache is None:
                self._view_cache = self._build_view(*self._published)
            return self._view_cache

    def _build_view(self, snap: Snapshot | None, verdicts: list[Any] | None,
                    ts: float) -> View:
        from gpuwarden import __version__

        rows: list[Row] = []
        enf = self.enforcer
        if snap is not None and verdicts is not None:
            disagree = {(v.wid, v.gpu) for v in verdicts if v.kind == "bypass"}
            for w in snap.workloads:
                t = self.tracked.get(w.wid)
                gpus = sorted(set(t.rec.devices if t else ()) | set(w.shim_used or {}))
                for g in gpus:
                    gg = GpuUuid(g)
                    used = {
                        "shim": None if w.shim_used is None else w.shim_used.get(gg, 0),
                        "ebpf": None if snap.ebpf is None else sum(
                            snap.ebpf.get(p, {}).get(gg, 0) for p in w.pids),
                        "nvml": None if snap.nvml_memory is None else sum(
                            snap.nvml_memory.get(p, {}).get(gg, 0) for p in w.pids),
                    }
                    sm = None if snap.nvml_sm is None else sum(
                        snap.nvml_sm.get(p, {}).get(gg, 0.0) for p in w.pids)
                    rows.append(Row(
                        key=w.key, gpu=g, memory_limit_bytes=w.rule.memory_limit_bytes,
                        used=used, sm_ratio=sm,
                        cores_limit_ratio=(w.rule.cores_percent / 100.0
                                           if w.rule.cores_percent else None),
                        agree=(w.wid, gg) not in disagree and w.shim_used is not None,
                        last_action=enf.last_action.get(w.wid, "") if enf else "",
                        rule=w.rule.name))
        ebpf_lost, ebpf_err = self._ebpf_counters
        return View(
            version=__version__, policy_digest=self.watcher.digest,
            policy_reloads_total=self.watcher.reloads_total,
            policy_reload_errors_total=self.watcher.reload_errors_total,
            policy_last_reload_ok=self.watcher.last_reload_ok,
            rows=tuple(rows), gpus=self._gpu_rows(), workloads=len(self.tracked),
            violations_total=dict(enf.violations) if enf else {},
            actions_total=dict(enf.actions) if enf else {},
            ebpf_up=self.ebpf is not None, ebpf_reason=self.ebpf_reason,
            ebpf_lost_events_total=ebpf_lost, ebpf_errors_total=ebpf_err,
            nvml_up=self.nvml is not None and not self.nvml_reason,
            nvml_reason=self.nvml_reason, procevents_up=self.procevents is not None,
            region_errors_total=self.region_errors_total, loop_seconds=self.loop_seconds,
            last_loop_ts=ts)

    def _gpu_rows(self) -> tuple[GpuRow, ...]:
        """Each GPU as NVML last sampled it, with what the tracked workloads' slices take."""
        mem: dict[str, int] = {}
        cores: dict[str, int] = {}
        slices: dict[str, int] = {}
        for d in self.devices:
            for t in self.tracked.values():
                if not t.rec.devices or d.uuid in t.rec.devices:
                    limit = t.rule.memory_limit_bytes
                    mem[d.uuid] = mem.get(d.uuid, 0) + min(limit if limit is not None
                                                           else d.total_bytes, d.total_bytes)
                    cores[d.uuid] = cores.get(d.uuid, 0) + t.rule.cores_percent
                    slices[d.uuid] = slices.get(d.uuid, 0) + 1
        sampled = self.nvml_sample.devices if self.nvml_sample is not None else {}
        rows = []
        for d in self.devices:
            s = sampled.get(d.uuid)
            rows.append(GpuRow(
                uuid=d.uuid, index=d.index, model=d.name, total_bytes=d.total_bytes,
                used_bytes=s.used_bytes if s else None,
                utilization_ratio=s.utilization_ratio if s else None,
                allocated_bytes=mem.get(d.uuid, 0), cores_allocated_ratio=cores.get(d.uuid, 0)
                / 100.0, slices=slices.get(d.uuid, 0),
                healthy=self.nvml is not None and not self.nvml_reason
                and (s is None or s.healthy)))
        return tuple(rows)

    def status(self) -> dict[str, Any]:
        """What `gpuwarden top` shows."""
        from agent.exporter import health

        v = self.view
        _ok, doc = health(v, time.time())
        rows = [{
            "workload": f"{r.key.namespace}/{r.key.pod}", "gpu": r.gpu, "rule": r.rule,
            "memory_limit_bytes": r.memory_limit_bytes, "used": dict(r.used),
            "sm_ratio": r.sm_ratio, "cores_limit_ratio": r.cores_limit_ratio,
            "agree": r.agree, "last_action": r.last_action} for r in v.rows]
        return {"ok": True, "health": doc, "rows": rows}

    def stop(self) -> None:
        self.stopping.set()
        self.wake()

    def close(self, exiting: bool = False) -> None:
        """Release every source. `exiting`: the process ends next, so the eBPF probes' slow
        teardown (seconds) is left to a child process (bpf.audit.AuditProbe.close)."""
        if self.reloader is not None:
            self.reloader.stop()
        if self.cluster is not None:
            self.cluster.close()
        if self.procevents is not None:
            self.procevents.close()
        if self.nvml is not None:
            self.nvml.close()
        for t in self.tracked.values():
            if t.reader is not None:
                with contextlib.suppress(Exception):
                    t.reader.close()
        if self.audit is not None:
            self.audit.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        # The state folder is free before the probes go: with `exiting`, a forked child takes
        # over their slow teardown and would otherwise hold the folder's lock for seconds.
        self.ledger.unlock()
        if self.ebpf is not None:
            with contextlib.suppress(Exception):
                self.ebpf.close(exiting=True) if exiting else self.ebpf.close()
