"""The control socket (0666, open to every local user) is bounded: a flood of idle connections
gets no thread each, a process over its share is answered "busy" at once, an idle or trickling
connection is closed after the idle timeout, and other clients are still served meanwhile."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agent.control import ControlServer, request

FLOOD = """
import socket, sys, time
conns = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    conns.append(s)
print("ready", flush=True)
sys.stdin.read()
"""


class FakeAgent:
    def admit(self, req: dict[str, Any], pid: int) -> dict[str, Any]:
        return {"ok": True}

    def status(self) -> dict[str, Any]:
        return {"ok": True, "rows": []}


def _flood(sock: Path, n: int) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", FLOOD, str(sock), str(n)], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_a_flood_of_idle_connections_gets_no_thread_each(tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    srv = ControlServer(sock, FakeAgent(), max_connections=16, max_per_peer=4)
    srv.start()
    before = threading.active_count()
    floods = [_flood(sock, 300) for _ in range(2)]
    try:
        deadline = time.monotonic() + 10
        while srv.busy_total < 2 * 300 - 2 * 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.busy_total == 2 * 300 - 2 * 4  # each flooder got its 4, no more
        assert threading.active_count() <= before + 2 * 4
        t0 = time.monotonic()
        assert request(sock, {"op": "status"}, timeout=5) == {"ok": True, "rows": []}
        assert time.monotonic() - t0 < 2
    finally:
        for p in floods:
            p.communicate("")
        srv.close()


def test_a_process_over_its_share_is_answered_busy_at_once(tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    srv = ControlServer(sock, FakeAgent(), max_connections=16, max_per_peer=2)
    srv.start()
    held = []
    try:
        for _ in range(2):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(sock))
            held.append(s)
        extra = socket.socket(socket.AF_UNIX)
        extra.settimeout(5)
        extra.connect(str(sock))
        answer = json.loads(extra.makefile().readline())
        extra.close()
        assert not answer["ok"] and "busy" in answer["error"] and "2 per process" in answer["error"]
    finally:
        for s in held:
            s.close()
        srv.close()


def test_an_idle_or_trickling_connection_is_closed_after_the_timeout(tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    srv = ControlServer(sock, FakeAgent(), idle_seconds=0.3)
    srv.start()
    try:
        for trickle in (False, True):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            s.connect(str(sock))
            t0 = time.monotonic()
            if trickle:  # one byte every 0.1 s never completes a request in time
                for b in b'{"op": "status"':
                    try:
                        s.send(bytes([b]))
                    except OSError:
                        break
                    time.sleep(0.1)
            answer = json.loads(s.makefile().readline())
            s.close()
            assert not answer["ok"] and "no request within 0.3 s" in answer["error"]
            assert time.monotonic() - t0 < 2.5
    finally:
        srv.close()
