"""The agent's tracked workloads and their own source, the libvgpu region: what the shim admitted
on each GPU and which processes registered with it. A region that cannot be read is reported
once, retried every 5 s, and the workload judged meanwhile without the shim's view. A registered
process counts as running the shim only while the shim's file is mapped in it (agent.shimcheck:
one that exec()s a program without the shim keeps its slot).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.decide import core_plan
from agent.ledger import WorkloadRecord
from agent.model import GpuUuid, Pid, Rule, Snapshot, Workload, WorkloadKey
from agent.procfs import mapped, start_time
from agent.proctree import ProcessTable
from agent.shimcheck import Maps, ShimCheck, check_shims
from libvgpu.paths import SHIM_NAME

__all__ = ["Regions", "Tracked", "workload_doc"]

REGION_RETRY = 5.0  # seconds between attempts to open a region that failed
SLOTS_PERIOD = 2.0  # seconds between reads of a region's process slots
# How long a process whose slot the shim released (libvgpu's atexit handler) may stay on the GPU
# before it is judged as running without the shim: its library destructors and the driver's
# teardown of a large context take seconds at most.
EXIT_GRACE = 10.0


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
    node_unknown: frozenset[str] = frozenset()  # RegionRead.node_unknown
    plan_written: dict[str, tuple[int | None, str]] = field(default_factory=dict)
    procs: dict[int, int] = field(default_factory=dict)  # the region's slots last read
    procs_next: float = 0.0
    procs_used: dict[str, int] = field(default_factory=dict)  # the totals at that read
    left: dict[Pid, float] = field(default_factory=dict)  # pid -> when its slot was gone
    shim_check: ShimCheck = field(default_factory=ShimCheck)  # looks at its processes' maps
    maps_next: float = 0.0  # when to look again (every SLOTS_PERIOD)
    maps_error: str = ""  # a process's maps could not be read (reported once)
    maps_seen: frozenset[Pid] = frozenset()  # the listed processes at the last look
    maps_all: bool = True  # look at every listed process at the next look
    exec_seen: set[Pid] = field(default_factory=set)  # listed processes that exec()ed since


def workload_doc(t: Tracked) -> dict[str, str]:
    """A workload as audit events name it."""
    return {"id": t.rec.wid, "namespace": t.key.namespace, "pod": t.key.pod,
            "container": t.key.container}


class Regions:
    """Opens and reads the tracked workloads' regions; counts and reports their errors."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], clock: Callable[[], float],
                 proc_root: str, exec_events: Callable[[], bool] = lambda: False) -> None:
        """`exec_events`: whether the kernel's exec events reach the agent now (the proc
        connector); without them every listed process's maps are looked at every SLOTS_PERIOD."""
        self._emit = emit
        self._clock = clock
        self._proc_root = proc_root
        self._exec_events = exec_events
        self.errors_total = 0

    @staticmethod
    def on_exec(pid: Pid, tracked: Mapping[str, Tracked]) -> None:
        """A process exec()ed: a workload whose shim lists it looks at its maps again."""
        for t in tracked.values():
            if pid in t.shim_pids:
                t.exec_seen.add(pid)

    @staticmethod
    def look_at_all(tracked: Mapping[str, Tracked]) -> None:
        """Exec events were lost (the connector overran): look at every listed process again."""
        for t in tracked.values():
            t.maps_all = True

    def open(self, t: Tracked) -> None:
        from agent.regions import RegionReader

        path = Path(t.rec.region)
        try:
            t.reader = RegionReader(path)
            if t.region_error:
                self._emit({"event": "region_recovered", "workload": workload_doc(t)})
            t.region_error = ""
        except Exception as err:
            t.reader = None
            if not t.region_error:
                self.errors_total += 1
                self._emit({"event": "region_error", "workload": workload_doc(t),
                            "error": str(err), "handling": "memory judged by eBPF/NVML "
                            "against the rule; no bypass verdict without the shim's view"})
            t.region_error = str(err)
            t.region_retry = self._clock() + REGION_RETRY

    @staticmethod
    def close(t: Tracked) -> None:
        if t.reader is not None:
            with contextlib.suppress(Exception):
                t.reader.close()

    def workload(self, t: Tracked, now: float, table: ProcessTable,
                 seen: Iterable[Mapping[Pid, Any]],
                 host_pids: Callable[[Tracked, dict[int, int]], set[int]] | None) -> Workload:
        """The workload as the loop judges it: its processes and what its region says now.
        `seen`: the processes eBPF and NVML see on a GPU; `host_pids`: for a pod container,
        the host pids of the region's (namespace) pids."""
        if t.reader is None and now >= t.region_retry:
            self.open(t)
        if t.reader is not None:
            try:
                # the slot list costs more than the totals: read it every 2 s, and at once when
                # a process of the workload that the shim does not list is seen on the GPU
                pids = table.pids_of(t.rec.wid)
                unknown = pids - t.shim_pids - t.shim_check.unloaded  # those listed: no news
                with_procs = now >= t.procs_next or any(p in v for v in seen for p in unknown)
                r = t.reader.read(with_procs=with_procs)
                if not with_procs and any(b < t.procs_used.get(u, 0) for u, b in r.used.items()):
                    # a slot released at a process's exit takes its bytes from the totals at
                    # once: read the slots now, so that the process is seen leaving rather than
                    # holding bytes the shim no longer counts
                    with_procs = True
                    r = t.reader.read()
                if not with_procs:
                    r = replace(r, procs=t.procs)
                else:
                    t.procs, t.procs_next, t.procs_used = r.procs, now + SLOTS_PERIOD, r.used
                t.used, t.limits, t.node_unknown = r.used, r.limits, r.node_unknown
                if t.rec.pod_uid:  # the shim's pids are of the container's namespace
                    if host_pids is None:
                        raise RuntimeError("a pod container's region outside cluster mode")
                    alive = {Pid(p) for p in host_pids(t, r.procs)}
                else:
                    alive = {Pid(p) for p, st in r.procs.items()
                             if table.start.get(Pid(p)) == st
                             or start_time(p, self._proc_root) == st}
                    for p in alive - table.pids_of(t.rec.wid):
                        table.attach(p, t.rec.wid, r.procs[p])  # the shim says it's ours
                shimmed = self._check_shims(t, frozenset(alive), now)
                owned = table.pids_of(t.rec.wid)
                for p in t.shim_pids - alive:
                    t.left.setdefault(p, now)
                t.left = {p: at for p, at in t.left.items() if p in owned and p not in alive}
                t.shim_pids = shimmed
            except Exception as err:
                self.close(t)
                t.reader = None
                t.region_error = ""
                self.open(t)
                if t.reader is None:
                    t.region_error = t.region_error or str(err)
        ok = t.reader is not None
        return Workload(wid=t.rec.wid, key=t.key, rule=t.rule,
                        pids=table.pids_of(t.rec.wid),
                        shim_used={GpuUuid(u): b for u, b in t.used.items()} if ok else None,
                        shim_pids=t.shim_pids if ok else frozenset(),
                        shim_leaving=frozenset(p for p, at in t.left.items()
                                               if ok and now - at < EXIT_GRACE),
                        shim_node_unknown=(frozenset(GpuUuid(u) for u in t.node_unknown)
                                           if ok else frozenset()),
                        region_error=t.region_error)

    def _check_shims(self, t: Tracked, listed: frozenset[Pid], now: float) -> frozenset[Pid]:
        """The listed (host) pids that still run the shim (agent.shimcheck): every SLOTS_PERIOD
        the agent looks at the maps of each listed process, or, while exec events reach it,
        only of those listed since the last look, those that exec()ed, and those found without
        the shim once (a read costs ~0.4 ms per 1000 mappings on a 2-core VM). Reports
        each process judged to have unloaded it, and maps that cannot be read (once a
        workload)."""
        if now < t.maps_next:  # nothing looked at: what was judged stands
            return listed - t.shim_check.unloaded
        t.maps_next = now + SLOTS_PERIOD
        looks: dict[Pid, Maps] = {}
        look_at = listed
        if self._exec_events() and not t.maps_all:
            look_at = listed & (t.exec_seen | set(t.shim_check.missing_since)
                                | (listed - t.maps_seen))
        t.maps_all, t.maps_seen = False, listed
        t.exec_seen -= look_at
        for p in look_at:
            try:
                m = mapped(p, SHIM_NAME, self._proc_root)
            except OSError as err:
                looks[p] = Maps.UNKNOWN
                if not t.maps_error:
                    t.maps_error = str(err)
                    self._emit({"event": "shim_check_error", "workload": workload_doc(t),
                                "pid": p, "error": str(err), "handling": "a process whose "
                                "maps cannot be read counts as running the shim"})
                continue
            looks[p] = Maps.UNKNOWN if m is None else Maps.LOADED if m else Maps.MISSING
        before = t.shim_check
        t.shim_check = check_shims(listed, looks, before, now)
        for p in sorted(t.shim_check.unloaded - before.unloaded):
            self._emit({"event": "shim_unloaded", "workload": workload_doc(t), "pid": p,
                        "detail": f"{SHIM_NAME} is no longer mapped in the process (an exec "
                        "without the shim?) although its slot lists it",
                        "handling": "judged as a process without the shim"})
        return listed - t.shim_check.unloaded

    def write_core_plan(self, snap: Snapshot, tracked: Mapping[str, Tracked]) -> None:
        """Write each workload's compute override (decide.core_plan) into its region, when it
        changed."""
        occ: dict[GpuUuid, list[Workload]] = {}
        for w in snap.workloads:
            t = tracked.get(w.wid)
            if t is None or t.reader is None:
                continue
            on = {GpuUuid(u) for u, b in t.used.items() if b > 0}
            for g in on:
                occ.setdefault(g, []).append(w)
        for (wid, gpu), plan in core_plan(occ).items():
            t = tracked[wid]
            want: tuple[int | None, str] = (
                (plan.effective_cores_percent, "yield" if plan.yield_to_high else "run")
                if plan.override else (None, "auto"))
            if t.plan_written.get(gpu) != want:
                try:
                    t.reader.region.set_compute_override(gpu, limit=want[0], yield_=want[1])
                    t.plan_written[gpu] = want
                except Exception as err:
                    self._emit({"event": "region_error", "workload": workload_doc(t),
                                "error": f"cannot write the compute override: {err}"})
