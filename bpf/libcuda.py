"""Finding the libcuda files to probe.

Three sources, all resolved to (st_dev, st_ino) so that one file is attached once however many
paths lead to it: the file the system's loader would resolve (`ldconfig -p`, then
`LD_LIBRARY_PATH`), so that a process started later is seen from its first call; the libcuda
each running process has mapped, through `/proc/PID/root` (containers see their own paths) or,
for a file deleted since (a driver upgrade), `/proc/PID/map_files`; and paths given explicitly.
Reads files and runs `ldconfig`; no BCC.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AttachedLib", "LibFile", "identify", "loader_candidates", "process_candidates"]

_LIBCUDA_NAME = re.compile(r"libcuda\.so(\.\d+)*$")


@dataclass(frozen=True)
class LibFile:
    """A candidate library: a path that reaches it now and the file's identity."""

    path: Path
    dev: int
    ino: int


@dataclass(frozen=True)
class AttachedLib:
    """A library the probes are attached to (the keys of `AuditProbe.attached()`)."""

    path: Path
    dev: int
    ino: int
    probes: int = 0


def identify(path: Path) -> LibFile | None:
    """The file behind `path`, or None if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return LibFile(Path(path), st.st_dev, st.st_ino)


def _ldconfig_paths(ldconfig: str) -> list[Path]:
    try:
        out = subprocess.run(
            [ldconfig, "-p"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    paths = []
    for line in out.splitlines():
        name, _, target = line.strip().partition(" => ")
        if target and name.split(" ", 1)[0] == "libcuda.so.1":
            paths.append(Path(target.strip()))
    return paths


def loader_candidates(
    env: Mapping[str, str] | None = None, ldconfig: str = "/sbin/ldconfig"
) -> list[LibFile]:
    """libcuda.so.1 as the dynamic loader would find it: LD_LIBRARY_PATH first, then the cache."""
    env = os.environ if env is None else env
    paths = [
        Path(d) / "libcuda.so.1" for d in env.get("LD_LIBRARY_PATH", "").split(":") if d
    ] + _ldconfig_paths(ldconfig)
    return _unique(identify(p) for p in paths)


def _maps_libcuda(maps_text: str) -> list[tuple[str, str]]:
    """(address range, path) of every mapping of a libcuda file in a /proc/PID/maps text."""
    found = []
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        deleted = path.endswith(" (deleted)")
        if deleted:
            path = path[: -len(" (deleted)")]
        if _LIBCUDA_NAME.search(os.path.basename(path)):
            found.append((parts[0], path + (" (deleted)" if deleted else "")))
    return found


def process_candidates(proc_root: Path = Path("/proc")) -> list[LibFile]:
    """The libcuda files mapped by running processes, reached from the host's mount namespace."""
    libs: list[LibFile | None] = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            maps = (entry / "maps").read_text()
        except OSError:
            continue  # gone, or a kernel thread
        for span, path in _maps_libcuda(maps):
            if path.endswith(" (deleted)"):
                libs.append(identify(entry / "map_files" / span))
            else:
                libs.append(identify(entry / "root" / path.lstrip("/")))
    return _unique(libs)


def _unique(libs: Iterable[LibFile | None]) -> list[LibFile]:
    seen: set[tuple[int, int]] = set()
    out = []
    for lib in libs:
        if lib is not None and (lib.dev, lib.ino) not in seen:
            seen.add((lib.dev, lib.ino))
            out.append(lib)
    return out
