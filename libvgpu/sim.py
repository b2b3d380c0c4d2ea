"""The simulated GPU's environment: which variables make a program load libvgpu/sim's
libcuda.so.1 and libnvidia-ml.so.1, and where their shared state lives.

Pure: it computes values and validates input; it starts nothing and loads no library.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from libvgpu.paths import sim_lib_dir

__all__ = [
    "DEFAULT_MEMORY",
    "MAX_DEVICES",
    "SIM_CTX_OVERHEAD",
    "SimInputError",
    "default_state_path",
    "parse_devices",
    "parse_size",
    "sim_env",
]

MAX_DEVICES = 8  # GWSIM_MAX_DEVICES in libvgpu/sim/common/simstate.h
DEFAULT_MEMORY = "80GiB"
# Device memory a process's first context on a device costs (GWSIM_DEFAULT_CTX_OVERHEAD);
# NVML lists a process with its allocations plus this.
SIM_CTX_OVERHEAD = 300 << 20

_UNITS = {"": 0, "B": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20, "G": 30, "GiB": 30,
          "T": 40, "TiB": 40}
_SIZE = re.compile(r"(\d+)([A-Za-z]*)")
_SIZE_HELP = "bytes (e.g. 1073741824) or an integer with a KiB, MiB, GiB or TiB suffix (e.g. 80GiB)"


class SimInputError(ValueError):
    """Bad input for the simulated GPU; the message names the input and what is valid."""


def parse_size(text: str | int, *, name: str = "size") -> int:
    """Bytes from "1073741824", "512MiB", "80GiB" (also K/M/G/T, powers of 1024)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.fullmatch(str(text).strip())
        if match is None or match.group(2) not in _UNITS:
            raise SimInputError(f"{name}: {text!r} is not a size; use {_SIZE_HELP}")
        value = int(match.group(1)) << _UNITS[match.group(2)]
    if value <= 0:
        raise SimInputError(f"{name}: {text!r} must be more than 0 bytes; use {_SIZE_HELP}")
    return value


def parse_devices(text: str | int, *, name: str = "devices") -> int:
    """A device count from 1 to MAX_DEVICES."""
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_DEVICES or isinstance(text, bool):
        raise SimInputError(
            f"{name}: {text!r} is not valid; use an integer from 1 to {MAX_DEVICES}"
        )
    return value


def default_state_path() -> Path:
    """Per-user state file in the runtime (or temporary) directory."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    return Path(base) / f"gpuwarden-sim-{os.getuid()}.state"


def sim_env(
    state_path: str | os.PathLike[str],
    devices: int | str = 1,
    memory: int | str = DEFAULT_MEMORY,
    *,
    kernel_scale: float | None = None,
    ld_library_path: str | None = None,
) -> dict[str, str]:
    """The variables that make programs use the simulated GPU with state at `state_path`.

    `devices` and `memory` apply when the state file is created (first use); an existing file
    keeps its own.  LD_LIBRARY_PATH puts the simulated libraries first, before
    `ld_library_path` (default: this process's LD_LIBRARY_PATH).
    """
    ndev = parse_devices(devices)
    nbytes = parse_size(memory, name="memory")
    libdir = str(sim_lib_dir())
    rest = os.environ.get("LD_LIBRARY_PATH", "") if ld_library_path is None else ld_library_path
    env = {
        "LD_LIBRARY_PATH": f"{libdir}:{rest}" if rest else libdir,
        "GPUWARDEN_SIM_STATE": str(Path(state_path)),
        "GPUWARDEN_SIM_DEVICES": str(ndev),
        "GPUWARDEN_SIM_MEMORY": str(nbytes),
    }
    if kernel_scale is not None:
        if not 0 <= kernel_scale <= 1e6:
            raise SimInputError(f"kernel_scale: {kernel_scale!r} is not valid; use 0 to 1e6")
        env["GPUWARDEN_SIM_KERNEL_SCALE"] = repr(float(kernel_scale))
    return env
