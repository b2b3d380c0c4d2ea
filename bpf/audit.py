"""Loader of the audit program (bpf/progs/audit.c): compiles it with BCC, attaches its uprobes to
every libcuda file found, and reads the in-kernel ledger, launch counters, error counters and
the event ring buffer.  The API the agent uses.

Not thread-safe: one thread drives an AuditProbe.  Never decides anything about workloads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from bpf.elfsyms import dynamic_functions
from bpf.environment import check_environment, check_library
from bpf.errors import ERROR_NAMES, BpfUnavailable, LibraryError
from bpf.libcuda import AttachedLib, LibFile, identify, loader_candidates, process_candidates
from bpf.probes import PROBES, Family
from bpf.structs import EVENT_FAILED, EVENT_KILLED, EventKind, GwEvent
from libvgpu.entry_points import HOOKS_DEF

__all__ = [
    "AttachedLib",
    "AuditEvent",
    "AuditProbe",
    "BpfUnavailable",
    "LibraryError",
    "check_environment",
]

BPF_DIR = Path(__file__).resolve().parent
PROGRAM = BPF_DIR / "progs" / "audit.c"
_EXIT_FORMAT = Path("/sys/kernel/tracing/events/sched/sched_process_exit/format")


@dataclass(frozen=True)
class AuditEvent:
    """One audited driver call (or a process's ledger cleared at exit/exec)."""

    kind: str  # EventKind name in lower case, e.g. "mem_alloc", "vmm_release", "proc_clear"
    pid: int
    tid: int
    device: int  # ordinal; -1 when the calling thread's context was not known
    bytes: int
    ptr: int
    ts_ns: int  # CLOCK_MONOTONIC
    killed: bool
    failed: bool = False  # the driver returned an error; nothing was accounted
    result: int = 0  # CUresult of a failed call
    cgroup_id: int = 0

    @classmethod
    def from_raw(cls, raw: GwEvent) -> AuditEvent:
        try:
            kind = EventKind(raw.kind).name.lower()
        except ValueError:
            kind = f"unknown_{raw.kind}"
        return cls(
            kind=kind,
            pid=raw.pid,
            tid=raw.tid,
            device=raw.device,
            bytes=raw.bytes,
            ptr=raw.ptr,
            ts_ns=raw.ts_ns,
            killed=bool(raw.flags & EVENT_KILLED),
            failed=bool(raw.flags & EVENT_FAILED),
            result=raw.result,
            cgroup_id=raw.cgroup_id,
        )


class AuditProbe:
    """The audit's uprobes, ledger and event stream.

    libs: the libcuda files to attach at start (None: discover them through the loader's
    search path and running processes).  launch_counters: attach the launch entry points.
    cgroup_ids: trace only callers in these cgroups (None: everyone).  The keyword-only sizes
    tune the maps (see bpf/lib/maps.h).
    """

    def __init__(
        self,
        libs: list[Path] | None = None,
        launch_counters: bool = True,
        cgroup_ids: set[int] | None = None,
        *,
        ringbuf_pages: int = 256,
        max_ptrs: int = 1 << 20,
        max_events: int = 100_000,
        proc_root: Path = Path("/proc"),
    ) -> None:
        if ringbuf_pages < 1 or ringbuf_pages & (ringbuf_pages - 1):
            raise ValueError(f"ringbuf_pages={ringbuf_pages}: must be a power of two >= 1")
        self._libs = [Path(p) for p in libs] if libs is not None else None
        self._launch_counters = launch_counters
        self._cgroup_ids = set(cgroup_ids) if cgroup_ids is not None else None
        self._ringbuf_pages = ringbuf_pages
        self._max_ptrs = max_ptrs
        self._proc_root = proc_root
        self._bpf: Any = None
        self._attached: dict[tuple[int, int], AttachedLib] = {}
        self._events: deque[AuditEvent] = deque(maxlen=max_events)
        self._received = 0
        self._dropped_here = 0  # events overflowing the Python-side queue
        self._started_ns = 0

    # ---- lifetime ----

    def start(self) -> AuditProbe:
        """Compile, load and attach.  Raises BpfUnavailable or LibraryError with the reason."""
        if self._bpf is not None:
            return self
        problems = check_environment(self._libs)
        if problems:
            lib_problems = [p for p in problems if p.startswith("library ")]
            if lib_problems and len(lib_problems) == len(problems):
                raise LibraryError("; ".join(lib_problems))
            raise BpfUnavailable(problems)
        from bcc import BPF  # heavy: only when started

        self._bpf = BPF(src_file=bytes(PROGRAM), cflags=self._cflags())
        self._bpf[b"events"].open_ring_buffer(self._on_event)
        if self._cgroup_ids is not None:
            table = self._bpf[b"cgroups"]
            for cg in self._cgroup_ids:
                table[ctypes.c_uint64(cg)] = ctypes.c_uint8(1)
        self._started_ns = time.monotonic_ns()
        try:
            start_libs = (
                [self._require(p) for p in self._libs]
                if self._libs is not None
                else self._discover()
            )
            for lib in start_libs:
                self._attach(lib)
        except BaseException:
            self.close()
            raise
        return self

    def close(self, *, exiting: bool = False) -> None:
        """Detach every probe and free the maps.

        The kernel unregisters uprobes slowly (about 0.1 s each, 4 s for the ~40 of a library)
        and the process that drops the last reference waits for it. `exiting=True`, for a
        process about to exit (a command ending, the agent stopping): a child takes over the
        probes, so this process ends at once and the child pays for the teardown."""
        if self._bpf is not None:
            if exiting:
                hand_over_teardown()
            self._bpf.cleanup()
            self._bpf = None
        self._attached.clear()

    def __enter__(self) -> AuditProbe:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- attaching ----

    def _cflags(self) -> list[str]:
        flags = [
            f"-I{BPF_DIR}",
            f"-I{HOOKS_DEF.parent}",  # lib/events.h takes the event kinds from hooks.def
            f"-DGW_RINGBUF_PAGES={self._ringbuf_pages}",
            f"-DGW_MAX_PTRS={self._max_ptrs}",
        ]
        if self._cgroup_ids is not None:
            flags.append("-DGW_CGROUP_FILTER=1")
        try:
            if "group_dead" in _EXIT_FORMAT.read_text():
                flags.append("-DGW_TP_HAS_GROUP_DEAD=1")
        except OSError:
            pass
        return flags

    def _require(self, path: Path) -> LibFile:
        problem = check_library(path)
        lib = identify(path)
        if problem or lib is None:
            raise LibraryError(problem or f"library {path}: no such file")
        return lib

    def _discover(self) -> list[LibFile]:
        found = loader_candidates() + process_candidates(self._proc_root)
        for p in self._libs or ():
            lib = identify(p)
            if lib is not None:
                found.append(lib)
        return [lib for lib in found if check_library(lib.path) is None]

    def _attach(self, lib: LibFile) -> AttachedLib | None:
        key = (lib.dev, lib.ino)
        if key in self._attached:
            return None
        symbols = dynamic_functions(lib.path)
        path = bytes(lib.path)
        seen_addr: set[int] = set()
        count = 0
        for probe in PROBES:
            if probe.family is Family.LAUNCH and not self._launch_counters:
                continue
            addr = symbols.get(probe.symbol)
            if addr is None or addr in seen_addr:
                continue  # absent from this driver version, or an alias of one attached
            seen_addr.add(addr)
            self._bpf.attach_uprobe(
                name=path, sym=probe.symbol.encode(), fn_name=probe.entry.encode()
            )
            count += 1
            if probe.ret:
                self._bpf.attach_uretprobe(
                    name=path, sym=probe.symbol.encode(), fn_name=probe.ret.encode()
                )
                count += 1
        attached = AttachedLib(lib.path, lib.dev, lib.ino, count)
        self._attached[key] = attached
        return attached

    def attached(self) -> list[AttachedLib]:
        return list(self._attached.values())

    def rescan(self) -> list[AttachedLib]:
        """Attach libcuda files that appeared since start (driver upgrade, new image)."""
        self._need_started()
        new = []
        for lib in self._discover():
            attached = self._attach(lib)
            if attached is not None:
                new.append(attached)
        return new

    # ---- reading ----

    def _need_started(self) -> None:
        if self._bpf is None:
            raise RuntimeError("AuditProbe is not started: call .start() (or use `with`)")

    def _on_event(self, _ctx: Any, data: Any, _size: int) -> None:
        raw = ctypes.cast(data, ctypes.POINTER(GwEvent)).contents
        if len(self._events) == self._events.maxlen:
            self._dropped_here += 1
        self._events.append(AuditEvent.from_raw(raw))
        self._received += 1

    def fileno(self) -> int:
        """A file descriptor that turns readable when the ring buffer holds events (libbpf's
        epoll fd of BCC's ring buffer manager), so a caller can wait in select/poll."""
        from bcc.libbcc import lib  # libbcc carries libbpf's ring_buffer__epoll_fd

        if self._bpf is None or not self._bpf._ringbuf_manager:
            raise RuntimeError("the audit is not started: no ring buffer to wait on")
        epoll_fd = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(("ring_buffer__epoll_fd", lib))
        fd = int(epoll_fd(ctypes.c_void_p(self._bpf._ringbuf_manager)))
        if fd < 0:
            raise RuntimeError(f"libbpf gave no epoll fd for the ring buffer ({fd})")
        return fd

    def poll_events(self, timeout_ms: int = 0) -> list[AuditEvent]:
        """Events delivered since the last call (waiting up to timeout_ms for the first)."""
        self._need_started()
        if timeout_ms > 0:
            self._bpf.ring_buffer_poll(timeout_ms)
        else:
            self._bpf.ring_buffer_consume()
        out = list(self._events)
        self._events.clear()
        return out

    def snapshot(self) -> dict[int, dict[int, int]]:
        """pid -> device ordinal (-1: unknown) -> live bytes, straight from the kernel ledger."""
        self._need_started()
        out: dict[int, dict[int, int]] = {}
        for key, value in self._bpf[b"ledger"].items():
            out.setdefault(key.pid, {})[key.device] = value.value
        return out

    def launch_counts(self) -> dict[int, int]:
        """pid -> kernel launches seen (0 entries when launch counters are off)."""
        self._need_started()
        return {k.value: v.value for k, v in self._bpf[b"launches"].items()}

    def errors(self) -> dict[str, int]:
        """In-kernel error counters by name (bpf/lib/errors.h), plus Python-side drops."""
        self._need_started()
        table = self._bpf[b"errors"]
        out = {name: table[ctypes.c_int(i)].value for i, name in enumerate(ERROR_NAMES)}
        out["queue_overflow"] = self._dropped_here
        return out

    def lost_events(self) -> int:
        """Events the kernel could not deliver (ring buffer full) or this queue dropped."""
        errs = self.errors()
        return errs["lost_event"] + errs["queue_overflow"]

    def health(self) -> dict[str, Any]:
        self._need_started()
        return {
            "running": True,
            "uptime_s": (time.monotonic_ns() - self._started_ns) / 1e9,
            "libraries": [
                {"path": str(a.path), "dev": a.dev, "ino": a.ino, "probes": a.probes}
                for a in self._attached.values()
            ],
            "probes": sum(a.probes for a in self._attached.values()),
            "launch_counters": self._launch_counters,
            "cgroup_filter": sorted(self._cgroup_ids) if self._cgroup_ids is not None else None,
            "events_received": self._received,
            "lost_events": self.lost_events(),
            "errors": {k: v for k, v in self.errors().items() if v},
            "processes": len(self._bpf[b"procs"]),
            "kill_limits": len(self._bpf[b"kill_limits"]),
        }

    # ---- enforcement ----

    def set_kill_limit(self, pid: int, max_bytes: int) -> None:
        """SIGKILL `pid` inside the allocation call that would take it over max_bytes."""
        self._need_started()
        _check_pid(pid)
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
            raise ValueError(f"kill limit for pid {pid}: {max_bytes!r} is not a byte count >= 0")
        self._bpf[b"kill_limits"][ctypes.c_uint32(pid)] = ctypes.c_uint64(max_bytes)

    def clear_kill_limit(self, pid: int) -> None:
        self._need_started()
        _check_pid(pid)
        with contextlib.suppress(KeyError):
            del self._bpf[b"kill_limits"][ctypes.c_uint32(pid)]

    # ---- housekeeping ----

    def collect_garbage(self) -> int:
        """Delete pointer and context rows of processes that are gone; returns rows deleted.

        The ledger itself never needs this (the exit tracepoint clears it); these rows only
        take map space, and their (pid, gen) key keeps them from matching a new process.
        """
        self._need_started()
        procs = self._bpf[b"procs"]
        live = {k.value: v.gen for k, v in procs.items()}
        deleted = 0
        for name in (b"ptrs", b"ctx_dev"):
            table = self._bpf[name]
            for k in [k for k in table if live.get(k.pid) != k.gen]:
                # A process first seen after `live` was read: look again before deleting.
                now = procs.get(ctypes.c_uint32(k.pid))
                if now is not None and now.gen == k.gen:
                    continue
                with contextlib.suppress(KeyError):
                    del table[k]
                    deleted += 1
        return deleted


def _check_pid(pid: int) -> None:
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 1 << 22:
        raise ValueError(f"pid {pid!r}: must be a process id between 1 and 4194303")


def hand_over_teardown(max_wait: float = 60.0) -> None:
    """Fork a child that keeps only the eBPF and perf-event descriptors (every other one,
    sockets, locks and the terminal included, is closed at once) until this process has exited
    (at most `max_wait` s), then exits: the kernel's uprobe teardown happens in the child."""
    parent = os.getpid()
    try:
        if os.fork() != 0:
            return
    except OSError:
        return
    try:
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                kind = os.readlink(f"/proc/self/fd/{name}")
                if not kind.startswith(("anon_inode:[perf_event]", "anon_inode:bpf")):
                    os.close(int(name))
        deadline = time.monotonic() + max_wait
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os._exit(0)
