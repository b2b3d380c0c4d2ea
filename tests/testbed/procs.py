"""Processes of the test bed: each component runs in its own session (process group) with its
output in a log file; `wait_for` polls a condition and says what did not happen (every test
imports it from here, through `testbed`: pytest puts tests/ on sys.path for
tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import TypeVar

__all__ = ["Component", "StartupError", "free_ports", "log_tail", "wait_for"]

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


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on 127.0.0.1 right now."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports
