"""Applying decide()'s actions: audit events and counters for every action, signals for
terminate/kill (each PID re-checked against the start time the agent recorded, through a pidfd,
so a reused PID is never hit), and in-kernel kill limits through the eBPF probe."""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.audit import AuditLog, action_event
from agent.model import Action, ActionKind, Pid, ViolationLabels, WorkloadKey
from agent.procfs import start_time

if TYPE_CHECKING:
    from agent.edges import EbpfProbe

__all__ = ["Enforcer", "send_signal"]


def send_signal(pid: int, sig: int, expected_start: int | None,
                proc_root: str | Path = "/proc") -> str:
    """Signal `pid` only if it is still the process first seen (same start time). Returns
    "sent", "gone" or "reused"."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return "gone"
    except OSError:
        fd = -1  # pidfds unsupported: fall back to kill(2) after the same check
    try:
        now = start_time(pid, proc_root)
        if now is None:
            return "gone"
        if expected_start is not None and now != expected_start:
            return "reused"
        try:
            if fd >= 0:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return "gone"
        return "sent"
    finally:
        if fd >= 0:
            os.close(fd)


COUNTER_RETENTION_S = 600.0  # metric series of an ended workload live on this long


class Enforcer:
    def __init__(self, audit: AuditLog, start_of: Callable[[Pid], int | None],
                 ebpf: EbpfProbe | None = None, proc_root: str | Path = "/proc") -> None:
        self.audit = audit
        self._start_of = start_of
        self.ebpf = ebpf
        self.proc_root = proc_root
        self.armed: dict[Pid, int] = {}
        self.violations: Counter[ViolationLabels] = Counter()
        self.actions: Counter[tuple[WorkloadKey, str]] = Counter()
        self.last_action: dict[str, str] = {}  # wid -> e.g. "kill", "would_kill"
        self._seen: dict[WorkloadKey, float] = {}  # key -> last time live or acted on

    def prune(self, live: Iterable[WorkloadKey], now: float,
              retention: float = COUNTER_RETENTION_S) -> None:
        """Drops the counters of workloads neither live nor acted on for `retention` seconds, so
        their metric series end like an ended pod's (the registry would grow with every pod
        otherwise); a workload back under the same key before then keeps counting."""
        for k in live:
            self._seen[k] = now
        gone = {k for k, t in self._seen.items() if now - t > retention}
        if not gone:
            return
        for k in gone:
            del self._seen[k]
        self.violations = Counter({k: v for k, v in self.violations.items() if k[0] not in gone})
        self.actions = Counter({k: v for k, v in self.actions.items() if k[0] not in gone})

    def apply(self, actions: Iterable[Action], now: float) -> list[dict[str, Any]]:
        events = []
        for a in actions:
            ev = self._apply_one(a, now)
            if ev is not None:
                events.append(self.audit.emit(ev))
        return events

    def _apply_one(self, a: Action, now: float) -> dict[str, Any] | None:
        if a.kind in (ActionKind.ARM, ActionKind.DISARM):
            return self._arm(a)
        ev = action_event(a)
        name = ev["action"]
        self._seen[a.key] = now
        if a.kind == ActionKind.ALERT and a.verdict is not None:
            self.violations[ViolationLabels(a.key, str(a.verdict.gpu), str(a.verdict.kind),
                                            a.policy_rule, a.reason, a.severity)] += 1
            ev["alert"] = a.reason
            ev["severity"] = a.severity
            ev["policy_rule"] = a.policy_rule
        self.actions[(a.key, name)] += 1
        self.last_action[a.wid] = name
        if a.kind in (ActionKind.TERMINATE, ActionKind.KILL) and not a.dry:
            sig = signal.SIGKILL if a.kind == ActionKind.KILL else signal.SIGTERM
            results = {}
            for p in a.pids:
                results[str(p)] = send_signal(p, sig, self._start_of(p), self.proc_root)
            ev["signal"] = sig.name
            ev["results"] = results
        return ev

    def _arm(self, a: Action) -> dict[str, Any] | None:
        if self.ebpf is None:
            return None
        (pid,) = a.pids
        try:
            if a.kind == ActionKind.ARM:
                self.ebpf.set_kill_limit(pid, a.limit_bytes)
                self.armed[pid] = a.limit_bytes
            else:
                with contextlib.suppress(KeyError, ValueError):
                    self.ebpf.clear_kill_limit(pid)
                self.armed.pop(pid, None)
        except (OSError, ValueError, RuntimeError) as err:
            ev = action_event(a)
            ev["error"] = str(err)
            return ev
        return action_event(a) if a.kind == ActionKind.ARM else None

    def forget(self, pid: Pid) -> None:
        """A process exited: the kernel already dropped its ledger; drop its kill limit."""
        if pid in self.armed:
            self.armed.pop(pid, None)
            if self.ebpf is not None:
                with contextlib.suppress(Exception):
                    self.ebpf.clear_kill_limit(pid)

