"""HTTP for kube-scheduler (filter / prioritize / bind as JSON POSTs), health, readiness and
metrics. Handlers only translate: decode the body, call the verb, encode the answer."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["JsonServer", "Route"]

Route = Callable[[Any], Any]
MAX_BODY = 64 << 20


class JsonServer(ThreadingHTTPServer):
    """POST routes take and return JSON; GET /healthz, /readyz and /metrics."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], routes: Mapping[str, Route],
                 ready: Callable[[], bool], registry: CollectorRegistry,
                 tls: ssl.SSLContext | None = None) -> None:
        self.routes = dict(routes)
        self.ready = ready
        self.registry = registry
        super().__init__(address, _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> JsonServer:
        threading.Thread(target=self.serve_forever, name=f"http-{self.port}",
                         daemon=True).start()
        return self


class _Handler(BaseHTTPRequestHandler):
    server: JsonServer
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client uses it
    # headers and body leave in two writes: with Nagle's algorithm and the peer's delayed ACK
    # a kept-alive connection waited 40 ms per answer
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet; metrics count calls
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, message: str) -> None:
        self._send(code, json.dumps({"Error": message}).encode())

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._send(200, b"ok", "text/plain")
        elif path == "/readyz":
            ok = self.server.ready()
            self._send(200 if ok else 503, b"ok" if ok else b"informers not synced yet",
                       "text/plain")
        elif path == "/metrics":
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        else:
            self._error(404, f"no such path {path}; GET /healthz, /readyz, /metrics")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        route = self.server.routes.get(path)
        if route is None:
            self._error(404, f"no such path {path}; POST one of "
                        f"{', '.join(sorted(self.server.routes))}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._error(400, "Content-Length is not a number")
            return
        if not 0 < length <= MAX_BODY:
            self._error(400, f"{path}: the body must be JSON of 1..{MAX_BODY} bytes, "
                        f"got {length}")
            return
        try:
            args = json.loads(self.rfile.read(length))
        except ValueError as err:
            self._error(400, f"{path}: the body is not JSON ({err})")
            return
        if not isinstance(args, dict):
            self._error(400, f"{path}: the body must be a JSON object, "
                        f"got {type(args).__name__}")
            return
        try:
            answer = route(args)
        except Exception as err:  # a bug must not leave kube-scheduler without an answer
            self._error(500, f"{path}: {type(err).__name__}: {err}")
            return
        self._send(200, json.dumps(answer).encode())
