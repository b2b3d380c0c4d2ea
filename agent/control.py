"""The agent's control socket (<state>/agent.sock): one JSON request per connection, one JSON
answer. The peer's PID comes from SO_PEERCRED, never from the request, so `gpuwarden run`
registers itself (the process that then execs the workload) and nobody else.

The socket is open to every local user (0666), so it is bounded: at most MAX_CONNECTIONS
connections are served at once and MAX_PER_PEER from one process; beyond that a connection is
answered "busy" and closed by the accepting thread, with no thread of its own. A connection
that sends no complete request within IDLE_SECONDS is answered so and closed. None of this runs
on the enforcement loop.

    {"op": "admit", "name", "namespace", "labels", "request"} -> {"ok", "wid", "env", ...}
    {"op": "status"} -> {"ok", "health", "rows"}
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import struct
import threading
import time
from pathlib import Path
from typing import Any

from agent.bounded import SHUTDOWN_POLL, BoundedThreadingMixIn

__all__ = ["ControlServer", "request"]

MAX_REQUEST = 1 << 16
MAX_CONNECTIONS = 64
MAX_PER_PEER = 8
IDLE_SECONDS = 5.0


def _peer_pid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[0])


def _read_request(sock: socket.socket, deadline: float) -> bytes | None:
    """One line (at most MAX_REQUEST bytes; EOF ends it too) before the deadline, else None: a
    client trickling bytes cannot hold its connection longer than one that sends nothing."""
    data = b""
    while b"\n" not in data and len(data) < MAX_REQUEST:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(MAX_REQUEST - len(data))
        except OSError:  # timed out or reset
            return None
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def _answer(sock: socket.socket, answer: dict[str, Any], block: bool = True) -> None:
    with contextlib.suppress(OSError):  # a client that gave up: nothing to tell it
        data = json.dumps(answer).encode() + b"\n"
        if block:
            sock.sendall(data)
        else:
            sock.send(data, socket.MSG_DONTWAIT)


class ControlServer:
    def __init__(self, path: Path, agent: Any, *, max_connections: int = MAX_CONNECTIONS,
                 max_per_peer: int = MAX_PER_PEER, idle_seconds: float = IDLE_SECONDS) -> None:
        self.path = path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a killed agent (one agent per state folder)
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock: socket.socket = self.request
                line = _read_request(sock, time.monotonic() + idle_seconds)
                if line is None:
                    _answer(sock, {"ok": False, "code": 2, "error": "no request within "
                                   f"{idle_seconds:g} s on the control socket; closing"})
                    return
                _answer(sock, outer.dispatch(line, _peer_pid(sock)))

        class Server(BoundedThreadingMixIn, socketserver.UnixStreamServer):
            request_queue_size = 256  # many `gpuwarden run` at once must not be refused

            def peer(self, request: Any, client_address: Any) -> int:
                return _peer_pid(request)

            def refuse(self, request: Any) -> None:
                _answer(request, {"ok": False, "code": 2, "error": (
                    "the agent's control socket is busy (at most "
                    f"{max_connections} connections, {max_per_peer} per process); try again")},
                    block=False)

        Server.max_connections, Server.max_per_peer = max_connections, max_per_peer
        self.agent = agent
        self.server = Server(str(path), Handler)
        os.chmod(path, 0o666)
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        args=(SHUTDOWN_POLL,), name="control",
                                        daemon=True)

    @property
    def busy_total(self) -> int:
        """Connections answered "busy"."""
        return self.server.busy_total

    def dispatch(self, line: bytes, pid: int) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("expected a JSON object")
        except ValueError as err:
            return {"ok": False, "code": 2, "error": f"bad request on the control socket: {err}"}
        op = req.get("op")
        try:
            if op == "admit":
                return dict(self.agent.admit(req, pid))
            if op == "status":
                return dict(self.agent.status())
        except Exception as err:  # a bug: still one answer, and the socket keeps serving
            return {"ok": False, "code": 2, "error": f"the agent failed on this {op} request "
                    f"({type(err).__name__}: {err}); this is a gpuwarden bug, please report it"}
        return {"ok": False, "code": 2,
                "error": f"unknown op {op!r} on the control socket (valid: admit, status)"}

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def request(sock_path: Path, req: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    """Send one request; raises OSError (agent not running) with the socket's path in it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(str(sock_path))
        except OSError as err:
            raise OSError(f"cannot reach the gpuwarden agent at {sock_path}: {err.strerror or err}"
                          " (start it with `gpuwarden agent --policy PATH`, or pass the "
                          "agent's --state-dir)") from None
        s.sendall(json.dumps(req).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    answer = json.loads(data)
    if not isinstance(answer, dict):
        raise OSError(f"the agent at {sock_path} answered something other than an object")
    return answer
