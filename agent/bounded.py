"""A bounded thread-per-connection server mixin, for the agent's servers that anyone on the host
may connect to (the control socket, /metrics and /healthz): at most `max_connections` served at
once and `max_per_peer` from one peer; beyond that the accepting thread calls `refuse` (which
must not block) and closes the connection, with no thread of its own. A flood of connections
therefore costs neither memory nor the enforcement loop's share of the interpreter.
"""

from __future__ import annotations

import socketserver
import sys
import threading
from typing import TYPE_CHECKING, Any

__all__ = ["SHUTDOWN_POLL", "BoundedThreadingMixIn"]

SHUTDOWN_POLL = 0.1  # serve_forever(poll_interval): how soon shutdown() is seen (default 0.5 s)


class BoundedThreadingMixIn(socketserver.ThreadingMixIn):
    daemon_threads = True
    max_connections = 64
    max_per_peer = 8

    def peer(self, request: Any, client_address: Any) -> Any:
        """Who the connection is from (the key of the per-peer bound); raise OSError to drop."""
        return client_address

    def refuse(self, request: Any) -> None:
        """Tell a connection over the bounds so, without blocking (default: nothing)."""

    if TYPE_CHECKING:  # provided by the server class this is mixed into
        def shutdown_request(self, request: Any) -> None: ...

    _open: dict[Any, int]
    _open_lock: threading.Lock
    busy_total = 0  # connections refused

    def process_request(self, request: Any, client_address: Any) -> None:
        if not hasattr(self, "_open"):
            self._open, self._open_lock = {}, threading.Lock()
        try:
            key = self.peer(request, client_address)
        except OSError:
            self.shutdown_request(request)
            return
        with self._open_lock:
            mine = self._open.get(key, 0)
            over = sum(self._open.values()) >= self.max_connections or mine >= self.max_per_peer
            if not over:
                self._open[key] = mine + 1
        if over:
            self.busy_total += 1
            self.refuse(request)
            self.shutdown_request(request)
            return
        thread = threading.Thread(target=self._serve_counted,
                                  args=(request, client_address, key), daemon=True)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went idle past the handler's timeout or hung up is not an error worth
        a traceback on stderr; anything else is reported as socketserver does."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)  # type: ignore[misc]  # a mixin: the server has it

    def _serve_counted(self, request: Any, client_address: Any, key: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                left = self._open.get(key, 1) - 1
                if left > 0:
                    self._open[key] = left
                else:
                    self._open.pop(key, None)
