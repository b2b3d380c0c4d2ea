"""The agent's state dir: one JSON record per admitted workload (who it is, its request, its
region, its root process with start time), written atomically, so an agent killed with -9
rebuilds its view on restart. Layout:

    <state>/agent.lock          held (flock) by the one agent that owns the folder; its pid
    <state>/agent.sock          control socket (gpuwarden run, top)
    <state>/audit.jsonl         audit events
    <state>/workloads/<id>.json one record per workload
    <state>/regions/<id>.region the workload's shared region (libvgpu)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AgentAlreadyRunning", "Ledger", "WorkloadRecord", "default_state_dir", "safe_id"]


class AgentAlreadyRunning(OSError):
    """Another agent holds the state folder."""


def safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:80] or "workload"


@dataclass
class WorkloadRecord:
    wid: str
    namespace: str
    name: str
    container: str = "main"
    labels: dict[str, str] = field(default_factory=dict)
    request: dict[str, int | None] = field(default_factory=dict)
    # cluster mode: what else the policy matches on, and which pod container this is
    annotations: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, str] = field(default_factory=dict)
    pod_uid: str = ""
    container_id: str = ""
    region: str = ""
    devices: list[str] = field(default_factory=list)
    root_pid: int = 0
    root_start: int = 0
    created: float = 0.0

    def policy_workload(self, node: str) -> Any:
        """The policy.Workload the policy evaluates for this workload on `node`."""
        from agent.rules import policy_workload

        return policy_workload(self.namespace, self.name, self.labels, self.request, node,
                               self.annotations, self.container, self.node_labels)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> WorkloadRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in doc.items() if k in known})


class Ledger:
    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir
        self._lock_fd: int | None = None
        self.workloads_dir = state_dir / "workloads"
        self.regions_dir = state_dir / "regions"
        for d in (state_dir, self.workloads_dir, self.regions_dir):
            d.mkdir(parents=True, exist_ok=True)

    def lock(self) -> None:
        """Take the state folder for this agent, or raise AgentAlreadyRunning: a second agent
        would remove the first one's socket and judge the same workloads twice. The lock is an
        flock, so it goes with the process however it ends (kill -9 included)."""
        path = self.root / "agent.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise AgentAlreadyRunning(
                f"another gpuwarden agent (pid {holder}) is running on the state folder "
                f"{self.root}; stop it first, or give this one its own --state-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def unlock(self) -> None:
        fd = self._lock_fd
        if fd is not None:
            self._lock_fd = None
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def socket_path(self) -> Path:
        return self.root / "agent.sock"

    @property
    def audit_path(self) -> Path:
        return self.root / "audit.jsonl"

    def region_path(self, wid: str) -> Path:
        return self.regions_dir / f"{wid}.region"

    def save(self, rec: WorkloadRecord) -> None:
        path = self.workloads_dir / f"{rec.wid}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(rec), indent=1))
        os.replace(tmp, path)

    def remove(self, wid: str) -> None:
        for p in (self.workloads_dir / f"{wid}.json", self.region_path(wid)):
            p.unlink(missing_ok=True)

    def load_all(self) -> tuple[list[WorkloadRecord], list[str]]:
        """Every readable record, and one error line per unreadable one (kept on disk)."""
        records, errors = [], []
        for p in sorted(self.workloads_dir.glob("*.json")):
            try:
                records.append(WorkloadRecord.from_json(json.loads(p.read_text())))
            except (OSError, ValueError, TypeError) as err:
                errors.append(f"{p}: unreadable workload record ({err}); expected the JSON "
                              "the agent writes")
        return records, errors


def default_state_dir() -> Path:
    """$GPUWARDEN_STATE_DIR, else /run/gpuwarden for root, else a per-user runtime folder."""
    env = os.environ.get("GPUWARDEN_STATE_DIR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/gpuwarden")
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / f"gpuwarden-{os.getuid()}"
