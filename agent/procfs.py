"""Reading /proc (the root is a parameter so tests pass fixture trees): a process's parent,
start time (field 22 of stat, clock ticks after boot, which tells a reused PID apart), name, the
workload marker that `gpuwarden run` puts in its environment, and whether a file is mapped in it
(its maps)."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.admission import MARKER_ENV
from agent.model import Pid

__all__ = ["MARKER_ENV", "ProcInfo", "environ_values", "mapped", "maps_file", "read_proc", "scan",
           "start_time"]


@dataclass(frozen=True)
class ProcInfo:
    pid: Pid
    ppid: Pid
    start_time: int
    comm: str
    marker: str | None = None  # GPUWARDEN_WORKLOAD from its environment


def _parse_stat(text: str) -> tuple[str, int, int]:
    # "pid (comm with ) maybe) S ppid ...": comm ends at the last ')'
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    # fields[0] is field 3 (state); ppid is field 4, starttime field 22
    return comm, int(fields[1]), int(fields[19])


def start_time(pid: int, root: str | Path = "/proc") -> int | None:
    try:
        text = Path(root, str(pid), "stat").read_text()
    except OSError:
        return None
    try:
        return _parse_stat(text)[2]
    except (IndexError, ValueError):
        return None


def running(pid: int, root: str | Path = "/proc") -> bool:
    """The process exists and is not a zombie or dead: a sampled view (NVML every 1-2 s) can
    still list a process that has exited since."""
    try:
        text = Path(root, str(pid), "stat").read_text()
    except OSError:
        return False
    fields = text.rpartition(")")[2].split()
    return bool(fields) and fields[0] not in ("Z", "X", "x")


def environ_values(pid: int, names: tuple[str, ...],
                   root: str | Path = "/proc") -> dict[str, str]:
    """The values of `names` in a process's environment at exec (not what it setenv()s since)."""
    try:
        data = Path(root, str(pid), "environ").read_bytes()
    except OSError:
        return {}
    wanted = {n.encode() + b"=": n for n in names}
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, eq, value = item.partition(b"=")
        key = name + eq
        if key in wanted:
            out[wanted[key]] = value.decode(errors="replace")
    return out


def _marker(pid: int, root: str | Path) -> str | None:
    return environ_values(pid, (MARKER_ENV,), root).get(MARKER_ENV)


def read_proc(pid: int, root: str | Path = "/proc", with_marker: bool = True) -> ProcInfo | None:
    try:
        text = Path(root, str(pid), "stat").read_text()
        comm, ppid, start = _parse_stat(text)
    except (OSError, IndexError, ValueError):
        return None
    return ProcInfo(Pid(pid), Pid(ppid), start, comm,
                    _marker(pid, root) if with_marker else None)


def scan(root: str | Path = "/proc", with_marker: bool = True) -> dict[Pid, ProcInfo]:
    out: dict[Pid, ProcInfo] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            info = read_proc(int(name), root, with_marker)
            if info is not None:
                out[info.pid] = info
    return out


def maps_file(maps: bytes, name: str) -> bool | None:
    """Whether a file called `name` is mapped, by the path column of /proc/PID/maps' text (a
    file unlinked since is still mapped: " (deleted)" follows its path). None for an empty text:
    a process that has exited (a zombie) or is exiting, or a kernel thread, maps nothing."""
    if not maps.strip():
        return None
    pattern = rb"/" + re.escape(name.encode()) + rb"(?: \(deleted\))?$"
    return re.search(pattern, maps, re.MULTILINE) is not None


def mapped(pid: int, name: str, root: str | Path = "/proc") -> bool | None:
    """maps_file() of a process's maps; None when the process is gone (or maps nothing).
    Raises OSError when they cannot be read otherwise (e.g. PermissionError)."""
    try:
        data = Path(root, str(pid), "maps").read_bytes()
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ESRCH):
            return None
        raise
    return maps_file(data, name)
