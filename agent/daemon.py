"""The agent's main loop: wires the I/O edges (policy watcher, process events, regions, NVML,
eBPF, control socket, exporter) around the pure cores (agent.decide, agent.admission).

- agent.sources: NVML, the eBPF ledger and the process events (opened once, read each loop);
- agent.workloads: the tracked workloads and their regions;
- agent.admission: what an admitted `gpuwarden run` gets (pure), the region created here;
- agent.podtracker: cluster mode's workloads, the node's pod containers.

One thread runs the loop and owns the eBPF probe; the control socket's threads only admit
workloads and read status, under the same lock.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agent.admission import Held, Plan, parse_request, plan_admission, workload_env
from agent.audit import AuditLog
from agent.decide import AgentPolicy, decide, judge, remember
from agent.enforce import Enforcer
from agent.exporter import GpuRow, Row, View
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
from agent.procfs import read_proc, running, scan, start_time
from agent.proctree import ProcessTable
from agent.reload import PolicyWatcher, ReloadThread
from agent.rules import to_rule
from agent.sources import Sources
from agent.workloads import Regions, Tracked, workload_doc
from gpuwarden.resources import DEVICE_SPLIT_COUNT
from libvgpu.region import RegionError

if TYPE_CHECKING:
    from agent.edges import NvmlLib, OpenEbpf, OpenProcEvents, ProbeEvent
    from agent.podtracker import PodTracker

__all__ = ["Agent", "AgentConfig", "Tracked"]


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
    split_count: int = DEVICE_SPLIT_COUNT  # standalone admission: workloads a GPU may hold


class Agent:
    def __init__(self, cfg: AgentConfig, nvml_lib: NvmlLib | None = None,
                 clock: Callable[[], float] = time.monotonic, *,
                 open_ebpf: OpenEbpf | None = None,
                 open_procevents: OpenProcEvents | None = None) -> None:
        """The I/O edges (agent.edges) default to the real ones: `nvml_lib` pynvml,
        `open_ebpf` bpf.audit's probe (unless cfg.ebpf is off), `open_procevents` the netlink
        proc connector; a test passes fakes and runs the agent in its own process."""
        self.cfg = cfg
        self.clock = clock
        self.lock = threading.RLock()
        self.ledger = Ledger(cfg.state_dir)
        self.watcher = PolicyWatcher(cfg.policy_paths)
        self.reloader: ReloadThread | None = None
        self.table = ProcessTable()
        self.tracked: dict[str, Tracked] = {}
        self.history: dict[Any, Any] = {}
        self.sources = Sources(nvml_lib, cfg.ebpf, cfg.libcuda, cfg.proc_root,
                               open_ebpf=open_ebpf, open_procevents=open_procevents)
        self.regions = Regions(self._emit, clock, cfg.proc_root,
                               exec_events=lambda: self.sources.procevents is not None)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._dirty = True
        self._ring_quiet_until = 0.0
        self._last_snap: Snapshot | None = None
        self._last_pol: AgentPolicy | None = None
        self._next_occupancy = 0.0
        self._alerted_bypass: set[str] = set()
        self._last_tick = 0.0
        self._next_tick = 0.0
        self._next_verify = 0.0
        self._last_rescan_req = -1e9
        self._published: tuple[Snapshot | None, list[Any] | None, float] = (None, None, 0.0)
        self._view_cache: View | None = None
        self.audit: AuditLog | None = None
        self.enforcer: Enforcer | None = None
        self.stopping = threading.Event()
        self.cluster = cfg.cluster
        self.pods: PodTracker | None = None
        if self.cluster is not None:
            from agent.podtracker import PodTracker

            self.pods = PodTracker(self.cluster, self.table, self.tracked, self.lock,
                                   clock, self._emit, self._new_tracked, self._end_workload,
                                   self.sources.gpu_pids, self._changed, cfg.proc_root)
        self.loop_seconds = 0.0

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
        src = self.sources
        src.open()
        self.enforcer = Enforcer(self.audit, self.table.start.get, src.ebpf,
                                 self.cfg.proc_root)
        self._restore()
        if self.pods is not None:
            self.audit.listeners.append(self.pods.cluster.on_audit)
            if not self.pods.cluster.start(self.wake):
                self._emit({"event": "pod_watch_not_synced", "handling": "processes in pod "
                            "containers are spared until the node's pods are listed"})
            self.pods.sync()
        self.audit.emit({"event": "agent_started", "policy_digest": self.watcher.digest,
                         "ebpf": "on" if src.ebpf else f"off: {src.ebpf_reason}",
                         "nvml": "on" if src.nvml else f"off: {src.nvml_reason}",
                         "devices": [d.uuid for d in src.devices],
                         "workloads_restored": len(self.tracked),
                         "dry_run": self.cfg.dry_run})
        self._publish()

    def _rule_for(self, rec: WorkloadRecord) -> tuple[Any, Rule]:
        eff = self.watcher.policy.evaluate(rec.policy_workload(self.cfg.node))
        return eff, to_rule(eff, self._gpu_totals(rec.devices))

    def _gpu_totals(self, uuids: list[str]) -> dict[str, int | None]:
        """The size of each of `uuids` (every GPU NVML knows when empty), None when unknown."""
        known: dict[str, int] = {d.uuid: int(d.total_bytes) for d in self.sources.devices}
        return {u: known.get(u) for u in uuids} if uuids else dict(known)

    def _new_tracked(self, rec: WorkloadRecord, key: WorkloadKey,
                     rule: Rule | None = None) -> Tracked:
        """A workload to track: its rule under the current policy (unless given), its region
        opened."""
        if rule is None:
            _, rule = self._rule_for(rec)
        t = Tracked(rec, key, rule)
        self.regions.open(t)
        return t

    def _restore(self) -> None:
        records, errors = self.ledger.load_all()
        for e in errors:
            self._emit({"event": "ledger_error", "error": e})
        for rec in records:
            self.tracked[rec.wid] = self._new_tracked(
                rec, WorkloadKey(rec.namespace, rec.name, rec.container))
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
                self._emit({"event": "workload_restored", "workload": workload_doc(t),
                            "pids": sorted(self.table.pids_of(t.rec.wid)),
                            "region_error": t.region_error or None})

    # ---- admission (control socket) ---------------------------------------------------------

    def admit(self, req: dict[str, Any], peer_pid: int) -> dict[str, Any]:
        from libvgpu.paths import shim_path
        from libvgpu.region import Region

        try:
            ask = parse_request(req)
        except (TypeError, ValueError) as err:
            return {"ok": False, "code": 2, "error": f"bad admission request: {err}"}
        devices = self.sources.devices
        with self.lock:
            rec = WorkloadRecord(wid="", namespace=ask.namespace, name=ask.name,
                                 labels=ask.labels, request=ask.request, created=time.time())
            try:
                eff, _ = self._rule_for(rec)
            except (TypeError, ValueError) as err:
                return {"ok": False, "code": 2, "error": f"bad resource request: {err}"}
            plan = plan_admission(ask, eff, rec.container, self.cfg.node, devices,
                                  self._held, self.sources.nvml_reason, self.cfg.split_count)
            if not isinstance(plan, Plan):
                if plan.event is not None:
                    self._emit(dict(plan.event))
                return plan.reply()
            rec.devices = plan.devices
            rec.wid = f"{safe_id(ask.namespace)}.{safe_id(ask.name)}-{secrets.token_hex(3)}"
            rec.region = str(self.ledger.region_path(rec.wid))
            limits = [lim.bytes for lim in plan.limits]
            try:
                shim = str(shim_path())
                with Region.create(rec.region, list(zip(rec.devices, limits, strict=True))) as r:
                    for uuid in rec.devices:
                        if plan.gpucores:
                            r.set_compute_limit(uuid, plan.gpucores)
            except Exception as err:
                return {"ok": False, "code": 2, "error": f"cannot prepare the workload: {err}"}
            rec.root_pid = peer_pid
            rec.root_start = start_time(peer_pid, self.cfg.proc_root) or 0
            self.ledger.save(rec)
            rule = to_rule(eff, {d.uuid: d.total_bytes for d in plan.gpus})
            t = self._new_tracked(rec, WorkloadKey(ask.namespace, ask.name, rec.container),
                                  rule)
            self.tracked[rec.wid] = t
            self.table.attach(Pid(peer_pid), rec.wid, rec.root_start)
            env = workload_env(plan, rec.wid, rec.region, shim,
                               os.environ.get("LD_PRELOAD", ""), len(devices))
            self._emit({"event": "workload_admitted", "workload": workload_doc(t),
                        "rule": rule.name, "limits_bytes": dict(zip(rec.devices, limits,
                                                                     strict=True)),
                        "gpucores": eff.gpucores, "priority": rule.priority,
                        "mode": rule.mode, "on_violation": eff.on_violation.describe(),
                        "pid": peer_pid})
            self._dirty = True
            # its libcuda may be a new file: look soon, but not more than every 5 s
            src = self.sources
            src.next_rescan = min(src.next_rescan, max(self._last_rescan_req + 5.0,
                                                       self.clock() + 1.0))
            self._last_rescan_req = self.clock()
        self.wake()
        return {"ok": True, "wid": rec.wid, "env": env, "rule": rule.name,
                "limits_bytes": limits, "devices": rec.devices,
                "on_violation": eff.on_violation.describe(), "mode": rule.mode}

    def _held(self) -> list[Held]:
        """The admitted workloads, each with its effective rule under the current policy."""
        return [Held(t.rec.container, t.rec.devices, self._rule_for(t.rec)[0])
                for t in self.tracked.values()]

    # ---- the loop ---------------------------------------------------------------------------

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def _changed(self) -> None:
        """Something a verdict depends on changed: judge again soon."""
        self._dirty = True

    def run_forever(self) -> None:
        while not self.stopping.is_set():
            self.step()

    def step(self, max_wait: float | None = None) -> None:
        src = self.sources
        now = self.clock()
        wait = max(0.0, self._next_tick - now)
        if max_wait is not None:
            wait = min(wait, max_wait)
        if self._dirty:
            wait = max(0.0, self.MIN_TICK_GAP - (now - self._last_tick))
        fds: list[Any] = [self._wake_r]
        if src.procevents is not None:
            fds.append(src.procevents)
        if src.ebpf is not None:
            # Wake on the ring buffer's fd when there is one, but after a drain that found
            # events, wait EBPF_BATCH before listening to it again: at thousands of driver
            # calls a second, waking for each would cost more than judging them.
            ring = src.ring_fd
            if ring is None:
                wait = min(wait, self.EBPF_BATCH)
            elif now >= self._ring_quiet_until:
                fds.append(ring)
            else:
                wait = min(wait, self._ring_quiet_until - now)
            select.select(fds, [], [], wait)
            events = src.ebpf.poll_events(0)
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
        if self.pods is not None:
            if self.pods.cluster.take_changed():
                self.pods.sync()
            elif self.clock() >= self.pods.next_adopt:
                self.pods.adopt_scan()
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
                except RegionError:  # its header overwritten (a workload can write it)
                    self._dirty = True  # let the tick report it and open the region again
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

    def _kernel_killed(self, e: ProbeEvent) -> None:
        """The eBPF program killed a process inside the allocation that crossed its limit."""
        wid = self.table.owner.get(Pid(e.pid))
        t = self.tracked.get(wid or "")
        ev: dict[str, Any] = {"event": "action", "action": "kernel_kill", "pids": [e.pid],
                              "call": e.kind, "bytes": e.bytes, "device": e.device,
                              "limit_bytes": self.enforcer.armed.get(Pid(e.pid))
                              if self.enforcer else None}
        if t is not None:
            ev["workload"] = workload_doc(t)
            ev["rule"] = t.rule.name
            if self.enforcer is not None:
                self.enforcer.actions[(t.key, "kernel_kill")] += 1
                self.enforcer.last_action[t.rec.wid] = "kernel_kill"
        self._emit(ev)

    def _process_events(self) -> None:
        procevents = self.sources.procevents
        if procevents is None:
            if self.clock() >= self._next_verify:
                self._poll_proc()
            return
        try:
            events = procevents.read()
        except OSError as err:  # ENOBUFS: the kernel dropped events; rescan
            self._emit({"event": "procevents_overrun", "error": str(err)})
            with self.lock:
                self.regions.look_at_all(self.tracked)
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
                elif ev.kind == "exec":
                    self.sources.forget_environment(ev.pid)
                    self.regions.on_exec(ev.pid, self.tracked)
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
                    if cluster:
                        assert self.pods is not None
                        n = self.pods.reclaim(t)
                    else:
                        n = (t.reader.region.reclaim_dead() if pid in t.reader.read().procs
                             else 0)
                except (RegionError, OSError) as err:  # corrupt, no libatomic, flock failed
                    self._emit({"event": "region_error", "workload": workload_doc(t),
                                "error": f"cannot reclaim a dead process's slot: {err}"})
                else:
                    if n:
                        self._emit({"event": "region_reclaimed", "workload": workload_doc(t),
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
        if t is not None:
            self.regions.close(t)
        self.ledger.remove(wid)  # before the event: whoever reads it finds the region gone
        if t is not None:
            self._emit({"event": "workload_exited", "workload": workload_doc(t), "why": why,
                        "last_action": (self.enforcer.last_action.pop(wid, "")
                                        if self.enforcer else "")})

    def _protected(self) -> frozenset[Pid]:
        out = {Pid(os.getpid()), Pid(1)}
        if self.pods is not None:
            out |= self.pods.pending_pids()
        names = set()
        for p in self.cfg.protect:
            if p.isdigit():
                out.add(Pid(int(p)))
            else:
                names.add(p)
        if names:
            for pid in self.sources.gpu_pids():
                info = read_proc(pid, self.cfg.proc_root, with_marker=False)
                if info is not None and info.comm in names:
                    out.add(Pid(pid))
        return frozenset(out)

    MIN_TICK_GAP = 0.02  # event-driven ticks: at most 50 a second
    EBPF_BATCH = 0.02

    def tick(self, now: float) -> None:
        t0 = time.perf_counter()
        self._dirty = False
        self._last_tick = now
        self._next_tick = now + self.cfg.tick_seconds
        src = self.sources
        with self.lock:
            src.sample(now, self.cfg.rescan_seconds, self.cfg.nvml_seconds,
                       self.table.start.get)
            if self.pods is not None:
                self.pods.adopt_gpu_pids()
            seen = (src.ebpf_view or {}, src.nvml_memory())
            host_pids = self.pods.host_pids if self.pods is not None else None
            workloads = tuple(self.regions.workload(t, now, self.table, seen, host_pids)
                              for t in list(self.tracked.values()))
            self._nvml_catch_up(workloads, now)
            unmanaged = to_rule(self.watcher.policy.unmanaged, self._gpu_totals([]),
                                name="unmanaged")
            if self.cfg.audit_unmanaged:
                unmanaged = replace(unmanaged, mode=Mode.AUDIT)
            pol = AgentPolicy(unmanaged=unmanaged,
                              dry_run=self.cfg.dry_run, protected=self._protected())
            assert self.enforcer is not None
            nvml_memory = src.nvml_sample.memory if src.nvml_sample else None
            if nvml_memory:  # a sample up to 2 s old: drop processes that have exited since
                nvml_memory = {p: v for p, v in nvml_memory.items()
                               if running(p, self.cfg.proc_root)}
            snap = Snapshot(
                workloads=workloads, ebpf=src.ebpf_view,
                nvml_memory=nvml_memory,
                nvml_sm=src.nvml_sample.sm if src.nvml_sample else None,
                history=self.history, armed=dict(self.enforcer.armed),
                ebpf_can_kill=src.ebpf is not None)
            src.read_ebpf_counters(now)
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
            self.regions.write_core_plan(snap, self.tracked)
            self.loop_seconds = time.perf_counter() - t0
            self._publish(snap, verdicts)

    NVML_CATCH_UP = 0.2  # seconds
    NVML_NEW_WORKLOAD = 5.0  # seconds after admission during which a workload is "new"

    def _nvml_catch_up(self, workloads: tuple[Workload, ...], now: float) -> None:
        """A new workload that holds memory by the shim or eBPF but is not in NVML's last
        sample (taken before it started, up to 2 s ago): sample NVML again in 0.2 s, so that
        its NVML figures do not read 0 for its first seconds."""
        src = self.sources
        if src.nvml is None or src.nvml_sample is None:
            return
        seen = src.nvml_sample.memory
        wall = time.time()
        for w in workloads:
            t = self.tracked.get(w.wid)
            if t is None or wall - t.rec.created > self.NVML_NEW_WORKLOAD:
                continue
            holds = any((w.shim_used or {}).values()) or any(
                any((src.ebpf_view or {}).get(p, {}).values()) for p in w.pids)
            if holds and not any(p in seen for p in w.pids):
                src.nvml_next = min(src.nvml_next, now + self.NVML_CATCH_UP)
                self._next_tick = min(self._next_tick, now + self.NVML_CATCH_UP)
                return

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
                    self._emit({"event": "rule_changed", "workload": workload_doc(t),
                                "rule": rule.name, "limits_bytes": {
                                    u: lim.bytes for u, lim in rule.memory_limits.items()}})
                    t.rule = rule
                    if t.reader is not None:
                        for d in self.sources.devices:
                            if d.uuid in t.rec.devices:
                                with contextlib.suppress(Exception):
                                    t.reader.region.set_memory_limit(
                                        d.uuid, rule.memory_limit(GpuUuid(d.uuid)).bytes)
                                    t.reader.region.set_compute_limit(d.uuid,
                                                                      int(eff.gpucores))
            self._dirty = True

    # ---- views ------------------------------------------------------------------------------

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
                        key=w.key, gpu=g,
                        memory_limit_bytes=t.limits.get(g) if t and t.reader else None,
                        used=used, sm_ratio=sm,
                        cores_limit_ratio=(w.rule.cores_percent / 100.0
                                           if w.rule.cores_percent else None),
                        agree=(w.wid, gg) not in disagree and w.shim_used is not None,
                        last_action=enf.last_action.get(w.wid, "") if enf else "",
                        rule=w.rule.name))
        src = self.sources
        ebpf_lost, ebpf_err = src.ebpf_counters
        return View(
            version=__version__, policy_digest=self.watcher.digest,
            policy_reloads_total=self.watcher.reloads_total,
            policy_reload_errors_total=self.watcher.reload_errors_total,
            policy_last_reload_ok=self.watcher.last_reload_ok,
            rows=tuple(rows), gpus=self._gpu_rows(), workloads=len(self.tracked),
            violations_total=dict(enf.violations) if enf else {},
            actions_total=dict(enf.actions) if enf else {},
            ebpf_up=src.ebpf is not None, ebpf_reason=src.ebpf_reason,
            ebpf_lost_events_total=ebpf_lost, ebpf_errors_total=ebpf_err,
            nvml_up=src.nvml is not None and not src.nvml_reason,
            nvml_reason=src.nvml_reason, procevents_up=src.procevents is not None,
            region_errors_total=self.regions.errors_total, loop_seconds=self.loop_seconds,
            last_loop_ts=ts)

    def _gpu_rows(self) -> tuple[GpuRow, ...]:
        """Each GPU as NVML last sampled it, with what the tracked workloads' slices take."""
        mem: dict[str, int] = {}
        cores: dict[str, int] = {}
        slices: dict[str, int] = {}
        src = self.sources
        for d in src.devices:
            for t in self.tracked.values():
                if not t.rec.devices or d.uuid in t.rec.devices:
                    limit = t.rule.memory_limit(GpuUuid(d.uuid))
                    mem[d.uuid] = mem.get(d.uuid, 0) + limit.within(d.total_bytes)
                    cores[d.uuid] = cores.get(d.uuid, 0) + t.rule.cores_percent
                    slices[d.uuid] = slices.get(d.uuid, 0) + 1
        sampled = src.nvml_sample.devices if src.nvml_sample is not None else {}
        rows = []
        for d in src.devices:
            s = sampled.get(d.uuid)
            rows.append(GpuRow(
                uuid=d.uuid, index=d.index, model=d.name, total_bytes=d.total_bytes,
                used_bytes=s.used_bytes if s else None,
                utilization_ratio=s.utilization_ratio if s else None,
                allocated_bytes=mem.get(d.uuid, 0), cores_allocated_ratio=cores.get(d.uuid, 0)
                / 100.0, slices=slices.get(d.uuid, 0),
                healthy=src.nvml is not None and not src.nvml_reason
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
        self.sources.close_early()
        for t in self.tracked.values():
            self.regions.close(t)
        if self.audit is not None:
            self.audit.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        # The state folder is free before the probes go: with `exiting`, a forked child takes
        # over their slow teardown and would otherwise hold the folder's lock for seconds.
        self.ledger.unlock()
        self.sources.close_ebpf(exiting)
