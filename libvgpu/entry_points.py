"""The CUDA entry-point table, libvgpu/include/hooks.def, read from Python.

hooks.def is an X-macro file: C includes it (libvgpu's hook table, its version script, the BPF
event kinds); Python reads its rows here (the eBPF probe list, the event kinds' mirror, tests).
"""

from __future__ import annotations

import functools
import re

from libvgpu.paths import LIBVGPU_DIR

__all__ = ["HOOKS_DEF", "rows"]

HOOKS_DEF = LIBVGPU_DIR / "include" / "hooks.def"
_COMMENT = re.compile(r"/\*.*?\*/", re.S)


@functools.cache
def _text() -> str:
    return _COMMENT.sub(" ", HOOKS_DEF.read_text("utf-8"))


def rows(macro: str) -> tuple[tuple[str, ...], ...]:
    """The arguments of every `macro(...)` row, in file order (the macros' own #define
    lines are not rows)."""
    found = re.finditer(rf"^[ \t]*{re.escape(macro)}\(([^)]*)\)", _text(), re.M)
    return tuple(tuple(arg.strip() for arg in m.group(1).split(",")) for m in found)
