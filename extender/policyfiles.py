"""When to load the policy again: a stamp of the policy files (each loaded file's modification
time and size, and the names in the folders given), compared every few seconds. A ConfigMap
mounted as a volume changes by swapping a symlink, which changes every stamp it covers."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["stamp"]

Stamp = tuple[tuple[str, int, int], ...]


def stamp(paths: Sequence[str], files: Sequence[str]) -> Stamp:
    """(name, mtime_ns, size) of the loaded `files` and of every *.gwp in the folders of
    `paths`; a missing file stamps as (name, -1, -1)."""
    names = set(files)
    for p in paths:
        folder = Path(p)
        if folder.is_dir():
            names.update(str(f) for f in folder.glob("*.gwp"))
    out = []
    for name in sorted(names):
        try:
            st = os.stat(name)
            out.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((name, -1, -1))
    return tuple(out)
