"""The netlink proc connector reports fork, exec and exit of a real child process."""

from __future__ import annotations

import os
import select
import subprocess
import time

import pytest

from agent.procevents import ProcEvents


@pytest.mark.skipif(os.geteuid() != 0, reason="the proc connector needs root")
def test_fork_exec_exit_of_a_child_are_seen() -> None:
    ev = ProcEvents.open()
    try:
        child = subprocess.Popen(["sh", "-c", "sleep 0.05 & wait"])
        child.wait()
        seen: list[tuple[str, int, int]] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and ("exit", child.pid) not in [s[:2] for s in seen]:
            select.select([ev], [], [], 0.2)
            seen += [(e.kind, e.pid, e.parent) for e in ev.read()]
        mine = [s for s in seen if child.pid in (s[1], s[2])]
        assert ("fork", child.pid, os.getpid()) in mine
        assert ("exec", child.pid, 0) in mine
        grandchild = [s for s in mine if s[0] == "fork" and s[2] == child.pid]
        assert grandchild, mine  # sh forked sleep
        assert ("exit", child.pid, 0) in mine
    finally:
        ev.close()
