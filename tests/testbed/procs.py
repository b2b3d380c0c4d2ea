"""Processes of the test bed: each component runs in its own session (process group) with its
output in a log file; `wait_for` polls a condition and says what did not happen (every test
imports it from here, through `testbed`: pytest puts tests/ on sys.path for
tests/conftest.py)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

__all__ = ["Component", "StartupError", "free_ports", "listen_range", "log_tail", "wait_for"]

T = TypeVar("T")


class StartupError(RuntimeError):
    """A component did not come up; the message holds the tail of its log."""


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError as err:
        return f"(no log: {err})"
    return "\n".join(text.splitlines()[-lines:])


class Component:
    """One long-running program: started in a new session, its stdout and stderr appended to
    `log`; `stop()` signals the whole process group."""

    def __init__(self, name: str, argv: Sequence[str | Path], log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Component:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"==== {time.strftime('%H:%M:%S')} $ {' '.join(self.argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 30) -> str:
        return log_tail(self.log, lines)

    def died_error(self) -> StartupError:
        code = self.proc.returncode if self.proc else None
        return StartupError(f"{self.name} exited with status {code}; the end of {self.log}:\n"
                            f"{self.tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the process group, SIGKILL after `timeout` seconds; reaps the process."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            # the leader is gone; members of its group that linger get the same signal
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        raise RuntimeError(f"{self.name} (pid {proc.pid}) survived SIGKILL")


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str, *,
             interval: float = 0.05, watch: Iterable[Component] = (),
             detail: Callable[[], str] | None = None) -> T:
    """Poll `predicate` until it returns something truthy and return that: the one poller of
    the tests, instead of a fixed sleep.  An exception of the predicate counts as "not yet".
    Raises StartupError when a watched component exits first, TimeoutError naming `what` (and
    the last exception the predicate raised, the watched components' log tails, and what
    `detail` says, e.g. a scrape or an event list) when time runs out."""
    watched = list(watch)
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except Exception as err:
            last_error, value = err, None
        if value:
            return value
        for comp in watched:
            if not comp.alive():
                raise comp.died_error()
        if time.monotonic() >= deadline:
            msg = f"{what} did not happen within {timeout:g} s"
            if last_error is not None:
                msg += f" (last error: {type(last_error).__name__}: {last_error})"
            for comp in watched:
                msg += f"\n---- the end of {comp.name}'s log ({comp.log}):\n{comp.tail()}"
            if detail is not None:
                try:
                    msg += f"\n{detail()}"
                except Exception as err:
                    msg += f"\n(no detail: {type(err).__name__}: {err})"
            raise TimeoutError(msg)
        time.sleep(interval)


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_RANGE_FALLBACK = (20000, 32767)  # below Linux's default ephemeral range, 32768-60999
_handed_out: set[int] = set()  # ports this process gave out: never twice (not bound yet, maybe)


def listen_range(ephemeral: str | None = None) -> tuple[int, int]:
    """The ports (first, last) to listen on: outside the kernel's ephemeral range (`ephemeral`,
    its ip_local_port_range text, read when not given), from which every outgoing connection
    takes its local port.  A port picked there by binding port 0 could be taken by a client
    socket of any process (an apiserver's connection to etcd, say) before the server for which
    it was picked binds it: a fresh-clone CI run lost a module's tests to that."""
    if ephemeral is None:
        try:
            ephemeral = EPHEMERAL_RANGE.read_text()
        except OSError:
            return LISTEN_RANGE_FALLBACK
    try:
        low, high = (int(x) for x in ephemeral.split())
    except ValueError:
        return LISTEN_RANGE_FALLBACK
    if low - 1 - 10000 >= 4096:
        return 10000, low - 1
    if 65535 - (high + 1) >= 4096:
        return high + 1, 65535
    return LISTEN_RANGE_FALLBACK


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on 127.0.0.1 right now, outside the ephemeral range
    (listen_range) and never handed out before by this process."""
    first, last = listen_range()
    rng = random.Random()
    ports: list[int] = []
    for _ in range(64 * count):
        if len(ports) == count:
            break
        port = rng.randint(first, last)
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        ports.append(port)
    if len(ports) < count:
        raise RuntimeError(f"no {count} free TCP ports on 127.0.0.1 in {first}-{last} "
                           f"after {64 * count} tries")
    return ports
