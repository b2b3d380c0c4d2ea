"""Audit events: one JSON object per line, appended to a file in the state dir and echoed to a
stream (stdout by default). Each names the workload, the rule, the evidence and the action."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from agent.model import Action, ActionKind

__all__ = ["AuditLog", "action_event"]


def action_event(a: Action, dry_run_reason: str = "") -> dict[str, Any]:
    """The audit event for one action: `action` is e.g. "kill" or, when dry, "would_kill"."""
    name = f"would_{a.kind}" if a.dry and a.kind != ActionKind.ALERT else str(a.kind)
    ev: dict[str, Any] = {
        "event": "violation" if a.kind == ActionKind.ALERT else "action",
        "action": name,
        "workload": {"id": a.wid, "namespace": a.key.namespace, "pod": a.key.pod,
                     "container": a.key.container},
        "pids": list(a.pids),
        "reason": a.reason,
    }
    if a.protected:
        ev["protected_pids"] = list(a.protected)
    if a.kind in (ActionKind.ARM, ActionKind.DISARM):
        ev["event"] = "kernel_kill_limit"
        ev["limit_bytes"] = a.limit_bytes
    v = a.verdict
    if v is not None:
        ev.update({"rule": v.rule, "verdict": str(v.kind), "gpu_uuid": str(v.gpu),
                   "evidence": dict(v.measured), "limit": v.limit, "detail": v.detail})
    if a.dry and dry_run_reason:
        ev["dry_reason"] = dry_run_reason
    return ev


class AuditLog:
    def __init__(self, path: Path | None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.stream = stream
        self._clock = clock
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        # called with each record after it is written (cluster mode: Events on pods); a
        # listener must not block or raise
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8")

    def emit(self, event: Mapping[str, Any]) -> dict[str, Any]:
        record = {"ts": round(self._clock(), 6), **event}
        line = json.dumps(record, sort_keys=False, default=str)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
            if self.stream is not None:
                self.stream.write(line + "\n")
                self.stream.flush()
        for listen in self.listeners:
            listen(record)
        return record

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
