"""Give back memory that only the eBPF program's compilation needed: BCC compiles with clang and
LLVM inside this process, which leaves their code resident and their heap in malloc's free lists
(together ~100 MB). After the compile, malloc_trim returns the free heap, and MADV_DONTNEED drops
the compiler libraries' executable pages from this process (for a private file mapping that was
never written, the pages simply fault back in from the file if ever run again; writable or
relocated segments are left alone)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import re
from pathlib import Path

__all__ = ["rss_bytes", "trim_after_compile"]

MADV_DONTNEED = 4
_COMPILER_LIBS = re.compile(r"/lib(LLVM|clang)[-.\w]*\.so")


def rss_bytes(status: Path = Path("/proc/self/status")) -> int:
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def trim_after_compile(maps: Path = Path("/proc/self/maps")) -> int:
    """Returns how many code mappings were dropped. Never raises: an optimisation only."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    with contextlib.suppress(AttributeError):  # not glibc
        libc.malloc_trim(0)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    dropped = 0
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split(maxsplit=5)
        # only read+execute, private, file-backed: code that was never written
        if len(parts) < 6 or parts[1] != "r-xp" or not _COMPILER_LIBS.search(parts[5]):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        if libc.madvise(lo, hi - lo, MADV_DONTNEED) == 0:
            dropped += 1
    return dropped
