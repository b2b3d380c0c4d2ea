"""Which process belongs to which workload. Pure bookkeeping fed by fork/exit events (or /proc
scans): a child belongs to its parent's workload; a workload's processes are rebuilt after a
restart from their GPUWARDEN_WORKLOAD marker and their ancestry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.model import Pid
from agent.procfs import ProcInfo

__all__ = ["ProcessTable"]


class ProcessTable:
    def __init__(self) -> None:
        self.owner: dict[Pid, str] = {}
        self.start: dict[Pid, int] = {}
        self._by_wid: dict[str, set[Pid]] = {}

    def attach(self, pid: Pid, wid: str, start_time: int | None) -> None:
        old = self.owner.get(pid)
        if old is not None and old != wid:
            self._by_wid.get(old, set()).discard(pid)
        self.owner[pid] = wid
        if start_time is not None:
            self.start[pid] = start_time
        self._by_wid.setdefault(wid, set()).add(pid)

    def on_fork(self, parent: Pid, child: Pid, start_time: int | None) -> str | None:
        wid = self.owner.get(parent)
        if wid is not None:
            self.attach(child, wid, start_time)
        return wid

    def on_exit(self, pid: Pid) -> str | None:
        wid = self.owner.pop(pid, None)
        self.start.pop(pid, None)
        if wid is not None:
            self._by_wid.get(wid, set()).discard(pid)
        return wid

    def drop_workload(self, wid: str) -> None:
        for p in self._by_wid.pop(wid, set()):
            self.owner.pop(p, None)
            self.start.pop(p, None)

    def pids_of(self, wid: str) -> frozenset[Pid]:
        return frozenset(self._by_wid.get(wid, ()))

    def workloads(self) -> list[str]:
        return [w for w, ps in self._by_wid.items() if ps]

    def rebuild(self, procs: Mapping[Pid, ProcInfo], known: Iterable[str],
                roots: Mapping[str, tuple[Pid, int]] | None = None) -> None:
        """Attribute live processes to known workloads: by marker, by a recorded root
        (pid + start time, so a reused PID is not taken), then by ancestry."""
        known = set(known)
        for info in procs.values():
            if info.marker is not None and info.marker in known:
                self.attach(info.pid, info.marker, info.start_time)
        for wid, (pid, st) in (roots or {}).items():
            root = procs.get(pid)
            if wid in known and root is not None and root.start_time == st:
                self.attach(pid, wid, st)
        changed = True
        while changed:  # children of attributed processes, to any depth
            changed = False
            for info in procs.values():
                if info.pid not in self.owner and info.ppid in self.owner:
                    self.attach(info.pid, self.owner[info.ppid], info.start_time)
                    changed = True
        for pid in [p for p in self.owner if p not in procs]:
            self.on_exit(pid)
