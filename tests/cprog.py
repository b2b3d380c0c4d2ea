"""Compile the small C test programs that run against libvgpu/sim (and the shim).

`compile_c(src, out_dir)` builds one program with the project's warning flags and
libvgpu/include on the include path.  By default the program is linked only with -ldl: it reaches
the driver the way the CUDA runtime does, dlopen("libcuda.so.1") + dlsym, so LD_LIBRARY_PATH
(the sim) or a preloaded shim decides what it gets.  `link_cuda=True` links -lcuda against
the simulated libcuda instead.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CFLAGS", "compile_c"]

REPO = Path(__file__).resolve().parent.parent
INCLUDE = REPO / "libvgpu" / "include"
CFLAGS = ("-std=c11", "-D_GNU_SOURCE", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread")


def compile_c(
    src: Path,
    out_dir: Path,
    *,
    link_cuda: bool = False,
    extra_flags: Sequence[str] = (),
    name: str | None = None,
    sources: Sequence[Path] = (),
    libs: Sequence[str] = (),
) -> Path:
    """Compile `src` (and `sources`, linked with it) into out_dir/<name> (default: the source's
    stem); raises RuntimeError with the compiler's output."""
    cc = shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (`cc`) on PATH; scripts/setup.sh installs one")
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / (name or src.stem)
    cmd = [cc, *CFLAGS, f"-I{INCLUDE}", f"-I{src.parent}", *extra_flags, str(src),
           *map(str, sources), "-o", str(exe)]
    if link_cuda:
        from libvgpu.paths import sim_lib_dir

        cmd += [f"-L{sim_lib_dir()}", "-lcuda"]
    cmd += [*libs, "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {src} failed:\n$ {' '.join(cmd)}\n{done.stderr}")
    return exe
