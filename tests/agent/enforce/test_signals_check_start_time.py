"""A signal reaches a PID only while it is still the process the agent recorded (same start
time): a reused PID is left alone, a gone one is reported as such. Dry actions never signal."""

from __future__ import annotations

import io
import json
import signal
import subprocess

from agent.audit import AuditLog
from agent.enforce import Enforcer, send_signal
from agent.model import Action, ActionKind, Pid, WorkloadKey
from agent.procfs import start_time


def test_reused_pid_is_not_signalled() -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        st = start_time(p.pid)
        assert st is not None
        assert send_signal(p.pid, signal.SIGKILL, st + 1) == "reused"
        assert p.poll() is None
        assert send_signal(p.pid, signal.SIGKILL, st) == "sent"
        assert p.wait(10) == -signal.SIGKILL
        assert send_signal(p.pid, signal.SIGKILL, st) == "gone"
    finally:
        p.kill()
        p.wait()


def test_enforcer_records_and_respects_dry() -> None:
    p = subprocess.Popen(["sleep", "30"])
    out = io.StringIO()
    try:
        starts = {Pid(p.pid): start_time(p.pid)}
        enf = Enforcer(AuditLog(None, out), starts.get)
        key = WorkloadKey("ns", "pod")
        enf.apply([Action(ActionKind.KILL, "w", key, (Pid(p.pid),), dry=True)], 0.0)
        assert p.poll() is None
        enf.apply([Action(ActionKind.TERMINATE, "w", key, (Pid(p.pid),))], 1.0)
        assert p.wait(10) == -signal.SIGTERM
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [e["action"] for e in events] == ["would_kill", "terminate"]
        assert events[1]["results"] == {str(p.pid): "sent"} and "results" not in events[0]
        assert enf.actions[(key, "would_kill")] == 1 and enf.last_action["w"] == "terminate"
    finally:
        p.kill()
        p.wait()
