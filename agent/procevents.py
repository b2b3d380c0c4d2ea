"""Kernel process events (fork, exec, exit) from the netlink proc connector, through pyroute2.

Only whole processes are reported (thread events are dropped). Needs root (CAP_NET_ADMIN);
`ProcEvents.open()` raises OSError otherwise, and the agent falls back to polling /proc.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from typing import Any

from agent.model import Pid

__all__ = ["ProcEvent", "ProcEvents"]


@dataclass(frozen=True)
class ProcEvent:
    kind: str  # fork | exec | exit
    pid: Pid  # the child for fork, else the process
    parent: int = 0


class ProcEvents:
    def __init__(self, nl: Any, sock: socket.socket, marshal: Any) -> None:
        self._nl = nl
        self._sock = sock
        self._marshal = marshal

    @classmethod
    def open(cls) -> ProcEvents:
        from pyroute2.netlink.connector.cn_proc import ProcEventMarshal, ProcEventSocket

        nl = ProcEventSocket()
        try:
            nl.bind()
            nl.control(listen=True)
        except Exception as err:
            nl.close()
            raise OSError(f"cannot listen to process events: {err}") from err
        sock = socket.socket(fileno=os.dup(nl.fileno()))
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        return cls(nl, sock, ProcEventMarshal())

    def fileno(self) -> int:
        return self._sock.fileno()

    def read(self) -> list[ProcEvent]:
        """Every event queued now (never blocks). Raises OSError(ENOBUFS) when the kernel
        dropped events: the caller then rescans /proc."""
        out: list[ProcEvent] = []
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return out
            for m in self._marshal.parse(data):
                ev = m.get("event")
                if ev == "PROC_EVENT_FORK":
                    if m.get("child_pid") == m.get("child_tgid"):
                        out.append(ProcEvent("fork", Pid(m["child_tgid"]),
                                             int(m["parent_tgid"])))
                elif ev == "PROC_EVENT_EXEC":
                    out.append(ProcEvent("exec", Pid(m["process_tgid"])))
                elif ev == "PROC_EVENT_EXIT" and m.get("process_pid") == m.get("process_tgid"):
                    out.append(ProcEvent("exit", Pid(m["process_tgid"])))

    def close(self) -> None:
        # No PROC_CN_MCAST_IGNORE: its acknowledgement may never come, and closing the socket
        # ends the subscription anyway.
        self._sock.close()
        with contextlib.suppress(Exception):
            self._nl.close()
