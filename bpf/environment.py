"""Can the audit run here?  `check_environment()` lists what is missing, one clear sentence per
problem, for the CLI and the agent.  Reads files only; imports BCC only to see that it imports.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from pathlib import Path

from bpf.elfsyms import ElfError, dynamic_functions
from bpf.probes import REQUIRED_SYMBOLS

__all__ = ["check_environment", "check_library"]


def check_library(path: Path) -> str | None:
    """Why `path` cannot be probed, or None if it exports what the ledger needs."""
    if not Path(path).exists():
        return f"library {path}: no such file (give the libcuda.so.1 that programs load)"
    try:
        symbols = dynamic_functions(Path(path))
    except ElfError as err:
        return f"library {err}"
    missing = [s for s in REQUIRED_SYMBOLS if s not in symbols]
    if missing:
        return (
            f"library {path}: not a CUDA driver library: it exports none of "
            f"{', '.join(missing)} (give the libcuda.so.1 that programs load)"
        )
    return None


def check_environment(
    libs: Iterable[Path] | None = None,
    *,
    sys_root: Path = Path("/"),
    euid: int | None = None,
) -> list[str]:
    """Problems that stop the audit from running (an empty list when it can run)."""
    problems = []
    if (os.geteuid() if euid is None else euid) != 0:
        problems.append("not running as root: loading BPF programs and uprobes needs root")
    if importlib.util.find_spec("bcc") is None:
        problems.append(
            "BCC's Python bindings are not importable (Debian: apt install python3-bpfcc "
            "bpfcc-tools; use a venv with --system-site-packages)"
        )
    tracing = sys_root / "sys/kernel/tracing"
    if not (tracing / "uprobe_events").exists():
        problems.append(
            f"tracefs is not mounted on {tracing} "
            f"(mount -t tracefs tracefs {tracing}; the kernel needs CONFIG_UPROBE_EVENTS)"
        )
    release = os.uname().release
    headers = sys_root / f"lib/modules/{release}/build"
    if not headers.exists() and not (sys_root / "sys/kernel/kheaders.tar.xz").exists():
        problems.append(
            f"no kernel headers at {headers} (install linux-headers for {release} or link "
            "a matching linux-headers tree there and at .../source)"
        )
    for lib in libs or ():
        problem = check_library(Path(lib))
        if problem:
            problems.append(problem)
    return problems
