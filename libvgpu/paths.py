"""Where libvgpu's built libraries are: the shim and the simulated NVIDIA driver.

Nothing here builds anything; a missing build raises `NotBuiltError` saying what to run.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LIBVGPU_DIR", "SHIM_NAME", "NotBuiltError", "build_dir", "shim_path", "sim_lib_dir"]

LIBVGPU_DIR = Path(__file__).resolve().parent
SIM_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
# The shim's file name, as built and wherever it is mounted into containers: the agent looks
# for it in a process's /proc/PID/maps to tell that the shim is still loaded there.
SHIM_NAME = "libvgpu.so"


class NotBuiltError(FileNotFoundError):
    """A libvgpu library is missing: `make -C libvgpu` (or `make -C libvgpu asan`) builds it."""


def _hint(asan: bool) -> str:
    target = " asan" if asan else ""
    return f"run `make -C {LIBVGPU_DIR}{target}` (scripts/setup.sh does it)"


def build_dir(asan: bool = False) -> Path:
    """libvgpu/build (or build/asan for the AddressSanitizer build)."""
    path = LIBVGPU_DIR / "build" / "asan" if asan else LIBVGPU_DIR / "build"
    if not path.is_dir():
        raise NotBuiltError(f"libvgpu is not built: {path} is missing; {_hint(asan)}")
    return path


def shim_path(asan: bool = False) -> Path:
    """The preloadable shim, build/libvgpu.so."""
    path = build_dir(asan) / SHIM_NAME
    if not path.is_file():
        raise NotBuiltError(f"the libvgpu shim is not built: {path} is missing; {_hint(asan)}")
    return path


def sim_lib_dir(asan: bool = False) -> Path:
    """The folder holding the simulated libcuda.so.1 and libnvidia-ml.so.1 (for LD_LIBRARY_PATH)."""
    path = build_dir(asan) / "sim"
    missing = [name for name in SIM_LIBRARIES if not (path / name).is_file()]
    if missing:
        raise NotBuiltError(
            f"the simulated GPU driver is not built: {', '.join(missing)} missing in {path}; "
            f"{_hint(asan)}"
        )
    return path
