"""Compiling the small C drivers of tests/libvgpu/c/ with pieces of the shim's own sources."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBVGPU = REPO / "libvgpu"
C_DIR = Path(__file__).resolve().parent / "c"

CFLAGS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-O1",
    "-g",
    "-pthread",
    f"-I{LIBVGPU / 'include'}",
    f"-I{LIBVGPU / 'src'}",
]


def build(driver: str, out_dir: Path, shim_sources: list[str] = (), extra: list[str] = ()) -> Path:
    """Compile c/<driver>.c (+ libvgpu/src/<name>.c for each shim source) into out_dir."""
    out = out_dir / driver
    srcs = [str(C_DIR / f"{driver}.c")] + [str(LIBVGPU / "src" / f"{s}.c") for s in shim_sources]
    cmd = ["cc", *CFLAGS, *srcs, "-o", str(out), "-ldl", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"compiling {driver} failed:\n{' '.join(cmd)}\n{res.stderr}")
    return out
