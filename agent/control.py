"""The agent's control socket (<state>/agent.sock): one JSON request per connection, one JSON
answer. The peer's PID comes from SO_PEERCRED, never from the request, so `gpuwarden run`
registers itself (the process that then execs the workload) and nobody else.

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
from pathlib import Path
from typing import Any

__all__ = ["ControlServer", "request"]

MAX_REQUEST = 1 << 16


class ControlServer:
    def __init__(self, path: Path, agent: Any) -> None:
        self.path = path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a killed agent
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                struct.calcsize("3i"))
                pid, _uid, _gid = struct.unpack("3i", creds)
                line = self.rfile.readline(MAX_REQUEST)
                answer = outer.dispatch(line, pid)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    # a client that gave up: its process exit ends what was admitted
                    self.wfile.write(json.dumps(answer).encode() + b"\n")

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            request_queue_size = 256  # many `gpuwarden run` at once must not be refused

        self.agent = agent
        self.server = Server(str(path), Handler)
        os.chmod(path, 0o666)
        self._thread = threading.Thread(target=self.server.serve_forever, name="control",
                                        daemon=True)

    def dispatch(self, line: bytes, pid: int) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("expected a JSON object")
        except ValueError as err:
            return {"ok": False, "code": 2, "error": f"bad request on the control socket: {err}"}
        op = req.get("op")
        if op == "admit":
            return dict(self.agent.admit(req, pid))
        if op == "status":
            return dict(self.agent.status())
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
