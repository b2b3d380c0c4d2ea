"""Policy loading and hot reload: the same validator as `gpuwarden policy check`, a content hash
polled about every 0.5 s (names and bytes of every file, so moves, renames, symlink swaps and
in-place writes all count), the last good policy kept when a reload fails.

The loader is a parameter (default: policy.load_policy) so tests pass their own.
"""

from __future__ import annotations

import hashlib
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["PolicyError", "PolicyWatcher", "ReloadOutcome", "ReloadThread", "content_hash",
           "render_diagnostics"]


class LoadResultLike(Protocol):
    @property
    def policy(self) -> Any: ...

    @property
    def diagnostics(self) -> Sequence[Any]: ...

    @property
    def ok(self) -> bool: ...


Loader = Callable[[list[str]], LoadResultLike]


class PolicyError(Exception):
    """The policy could not be loaded; the message lists every diagnostic."""


def _default_loader(paths: list[str]) -> LoadResultLike:
    from policy import load_policy

    return load_policy(paths)


def render_diagnostics(diags: Sequence[Any]) -> str:
    out = []
    for d in diags:
        render = getattr(d, "render", None)
        out.append(render() if callable(render) else str(d))
    return "\n".join(out) or "the policy is invalid (no diagnostics given)"


def content_hash(paths: Sequence[str]) -> str:
    """sha256 over (relative name, bytes) of every regular file under the paths, sorted, hidden
    files (editor swap files, ..data of a ConfigMap) included only through what they point to."""
    h = hashlib.sha256()
    for root in paths:
        p = Path(root)
        h.update(b"\0root\0" + str(p).encode())
        if p.is_dir():
            files = sorted(f for f in p.rglob("*")
                           if f.is_file() and not any(part.startswith(".")
                                                      for part in f.relative_to(p).parts))
        else:
            files = [p] if p.exists() else []
        for f in files:
            h.update(b"\0file\0" + str(f.relative_to(p) if p.is_dir() else f.name).encode())
            _hash_file(h, f)
        if not p.exists():
            h.update(b"\0missing")
    return h.hexdigest()


def _hash_file(h: Any, f: Path) -> None:
    """Feed a regular file's bytes in chunks (memory bounded, whatever its size); anything else
    (a FIFO or device behind a symlink, a file that vanished) only by what it is."""
    try:
        fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:  # vanished between listing and reading: next poll sees it
        h.update(f"\0error {err.errno}".encode())
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            h.update(f"\0not a file {stat.S_IFMT(st.st_mode)}".encode())
            return
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    except OSError as err:
        h.update(f"\0error {err.errno}".encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    digest: str
    message: str


class PolicyWatcher:
    def __init__(self, paths: Sequence[str], loader: Loader | None = None,
                 interval: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = [os.fspath(p) for p in paths]
        self._loader = loader or _default_loader
        self.interval = interval
        self._clock = clock
        self._seen = ""
        self._next = 0.0
        self.policy: Any = None
        self.digest = ""
        self.reloads_total = 0
        self.reload_errors_total = 0
        self.last_error = ""
        self.last_reload_ok = True

    def _load(self) -> tuple[Any, str]:
        result = self._loader(self.paths)
        if not result.ok or result.policy is None:
            raise PolicyError(render_diagnostics(result.diagnostics))
        digest = str(getattr(result.policy, "digest", "") or self._seen[:16])
        return result.policy, digest

    def load_initial(self) -> Any:
        """Load or raise PolicyError: the agent never runs without a valid policy."""
        for p in self.paths:
            if not os.path.exists(p):
                raise PolicyError(f"--policy {p}: no such file or directory "
                                  "(give a policy file or a directory of them)")
        self._seen = content_hash(self.paths)
        self.policy, self.digest = self._load()
        self._next = self._clock() + self.interval
        return self.policy

    def poll(self, force: bool = False) -> ReloadOutcome | None:
        """Reload if the content changed since the last look; None when nothing changed."""
        now = self._clock()
        if not force and now < self._next:
            return None
        self._next = now + self.interval
        seen = content_hash(self.paths)
        if seen == self._seen and not force:
            return None
        self._seen = seen
        try:
            policy, digest = self._load()
        except PolicyError as err:
            self.reload_errors_total += 1
            self.last_error = str(err)
            self.last_reload_ok = False
            return ReloadOutcome(False, self.digest, f"reload failed, keeping policy "
                                 f"{self.digest}:\n{err}")
        except Exception as err:  # a loader bug must not take the agent down
            self.reload_errors_total += 1
            self.last_error = (f"{', '.join(self.paths)}: the policy loader failed "
                               f"({type(err).__name__}: {err}); this is a gpuwarden bug, "
                               "please report it with the policy files")
            self.last_reload_ok = False
            return ReloadOutcome(False, self.digest, f"reload failed, keeping policy "
                                 f"{self.digest}: {self.last_error}")
        self.policy, self.digest = policy, digest
        self.reloads_total += 1
        self.last_error = ""
        self.last_reload_ok = True
        return ReloadOutcome(True, digest, f"policy reloaded: {digest}")


class ReloadThread:
    """Runs a PolicyWatcher's polls on a thread of their own, so that a slow or stuck reload
    (a huge file, a file that never ends) never delays the enforcement loop: the loop takes
    finished outcomes with take(), which never blocks. `wake` is called after each outcome."""

    def __init__(self, watcher: PolicyWatcher, wake: Callable[[], None] = lambda: None) -> None:
        self.watcher = watcher
        self._wake = wake
        self._outcomes: queue.SimpleQueue[ReloadOutcome] = queue.SimpleQueue()
        self._stop = threading.Event()
        self.busy_since: float | None = None  # monotonic time a poll started, while it runs
        self._thread = threading.Thread(target=self._run, name="policy-reload", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.watcher.interval):
            self.busy_since = time.monotonic()
            try:
                outcome = self.watcher.poll()
            finally:
                self.busy_since = None
            if outcome is not None:
                self._outcomes.put(outcome)
                self._wake()

    def take(self) -> ReloadOutcome | None:
        try:
            return self._outcomes.get_nowait()
        except queue.Empty:
            return None

    def stalled_seconds(self) -> float:
        """How long the reload now running has taken (0 when none runs)."""
        since = self.busy_since
        return 0.0 if since is None else time.monotonic() - since

    def stop(self) -> None:
        """Stop polling; a reload stuck in a read is left to die with the process (daemon)."""
        self._stop.set()
        self._thread.join(timeout=0.5)
