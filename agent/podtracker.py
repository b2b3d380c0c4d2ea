"""Cluster mode's workloads: every running GPU container of the node's pods (agent.cluster) is
tracked, ended when it stops, and given its processes by cgroup, whether they were started by
the runtime, exec'd into the container, or first seen on a GPU.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from agent.cluster import ClusterMode, record_of
from agent.ledger import WorkloadRecord
from agent.model import Pid, WorkloadKey
from agent.procfs import start_time
from agent.proctree import ProcessTable
from agent.workloads import Tracked, workload_doc

__all__ = ["PodTracker"]

ADOPT_PERIOD = 2.0  # look for processes in pod containers (exec'd ones have no owned parent)


class PodTracker:
    """Keeps the agent's `tracked` workloads equal to the node's running GPU containers.

    `new_tracked` builds a workload from its record (its rule, its region opened),
    `end_workload` ends one, `gpu_pids` gives the processes eBPF and NVML see on a GPU,
    `changed` tells the loop to judge again soon."""

    def __init__(self, cluster: ClusterMode, table: ProcessTable, tracked: dict[str, Tracked],
                 lock: threading.RLock, clock: Callable[[], float],
                 emit: Callable[[dict[str, Any]], None],
                 new_tracked: Callable[[WorkloadRecord, WorkloadKey], Tracked],
                 end_workload: Callable[[str, str], None],
                 gpu_pids: Callable[[], set[int]], changed: Callable[[], None],
                 proc_root: str) -> None:
        self.cluster = cluster
        self._table = table
        self._tracked = tracked
        self._lock = lock
        self._clock = clock
        self._emit = emit
        self._new_tracked = new_tracked
        self._end_workload = end_workload
        self._gpu_pids = gpu_pids
        self._changed = changed
        self._proc_root = proc_root
        self._by_container: dict[str, str] = {}  # container id -> wid
        self._bad_pods_told: set[str] = set()  # unreadable pods already reported
        self.next_adopt = 0.0

    def sync(self) -> None:
        """Track every running GPU container of the node's pods, end those gone, and give each
        its processes by cgroup."""
        want = {w: pc for w, pc in self.cluster.desired().items() if pc.container_id}
        with self._lock:
            for uid, why in self.cluster.bad_pods.items():
                if uid not in self._bad_pods_told:
                    self._emit({"event": "pod_unreadable", "pod_uid": uid, "error": why})
            self._bad_pods_told = set(self.cluster.bad_pods)
            for wid, t in list(self._tracked.items()):
                pc = want.get(wid)
                if t.rec.pod_uid and (pc is None or pc.container_id != t.rec.container_id):
                    self._by_container.pop(t.rec.container_id, None)
                    self._end_workload(wid, "the container is not running any more")
            for wid, pc in want.items():
                if wid not in self._tracked:
                    self._track(pc)
        self.adopt_scan()

    def adopt_scan(self) -> None:
        """Processes of pod containers that no workload owns yet (exec'd into a container,
        started before its status named it): theirs now."""
        self.next_adopt = self._clock() + ADOPT_PERIOD
        with self._lock:
            for pid, st, ref in self.cluster.scan(self._table.owner):
                self._adopt(pid, st, ref)

    def _track(self, pc: Any) -> None:
        w = pc.workload
        rec = record_of(pc, time.time())
        t = self._new_tracked(rec, WorkloadKey(w.namespace, w.name, w.container))
        if not rec.devices and t.reader is not None:
            with contextlib.suppress(Exception):  # read again each loop, errors reported
                rec.devices = sorted(t.reader.read(with_procs=False).limits)
        self._tracked[pc.wid] = t
        self._by_container[pc.container_id] = pc.wid
        self._changed()
        self._emit({"event": "workload_adopted", "workload": workload_doc(t),
                    "rule": t.rule.name, "limits_bytes": {
                        u: lim.bytes for u, lim in t.rule.memory_limits.items()},
                    "region": rec.region, "region_error": t.region_error or None})

    def _adopt(self, pid: int, st: int, ref: Any) -> bool:
        wid = self._by_container.get(ref.container_id)
        if wid is None:
            return False
        self.cluster.resolved(pid)
        self._table.attach(Pid(pid), wid, st)
        self._changed()
        return True

    def adopt_gpu_pids(self) -> None:
        """Processes on a GPU that no workload owns yet: in a pod container, they are its."""
        for pid in self._gpu_pids() - set(self._table.owner):
            st = start_time(pid, self._proc_root)
            ref = self.cluster.container(pid, st) if st is not None else None
            if ref is not None and st is not None:
                self._adopt(pid, st, ref)

    def pending_pids(self) -> set[Pid]:
        """Unowned GPU processes in pod containers that the pod cache cannot name yet."""
        now = self._clock()
        out: set[Pid] = set()
        for pid in self._gpu_pids() - set(self._table.owner):
            if (self.cluster.container(pid) is not None
                    and self.cluster.pending(pid, now)):
                out.add(Pid(pid))
        return out

    def forget_container(self, container_id: str) -> None:
        self._by_container.pop(container_id, None)

    def _mine(self, t: Tracked) -> dict[int, int]:
        return {int(p): self._table.start[p] for p in self._table.pids_of(t.rec.wid)
                if p in self._table.start}

    def host_pids(self, t: Tracked, procs: dict[int, int]) -> set[int]:
        """The host pids of the shim's slots in a pod container's region."""
        from agent.pods import host_pids

        return set(host_pids(procs, self.cluster.ns_pids(self._mine(t))))

    def reclaim(self, t: Tracked) -> int:
        """Free the slots of dead processes of a pod container: alive means a live process of
        the container has that namespace pid and start time."""
        assert t.reader is not None
        live = set(self.cluster.ns_pids(self._mine(t)).values())
        return int(t.reader.region.reclaim_dead(alive=lambda p, st: (p, st) in live))
