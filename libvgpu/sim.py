"""The simulated GPU's environment: which variables make a program load libvgpu/sim's
libcuda.so.1 and libnvidia-ml.so.1, and where their shared state lives.

Pure: it computes values and validates input; it starts nothing and loads no library.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from libvgpu.paths import sim_lib_dir

__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_TIMESLICE_US",
    "MAX_DEVICES",
    "SIM_CTX_OVERHEAD",
    "SimInputError",
    "default_state_path",
    "existing_shape",
    "parse_devices",
    "parse_size",
    "parse_timeslice",
    "sim_env",
]

MAX_DEVICES = 8  # GWSIM_MAX_DEVICES in libvgpu/sim/common/simstate.h
DEFAULT_MEMORY = "80GiB"
# Device memory a process's first context on a device costs (GWSIM_DEFAULT_CTX_OVERHEAD);
# NVML lists a process with its allocations plus this.
SIM_CTX_OVERHEAD = 300 << 20

# The head of struct gwsim_state (libvgpu/sim/common/simstate.h): magic, version, num_devices,
# file_size, ctx_overhead, timeslice_ns, then dev[] whose first field is total_bytes (tests/sim
# checks these against the C layout).
GWSIM_MAGIC = 0x5550474D49535747
STATE_HEAD = struct.Struct("<QIIQQQ")
DEVICE_SIZE = 160
# GPUWARDEN_SIM_TIMESLICE (simstate.h): microseconds, 0 = launch order; tests/sim checks these
# against the C side.
DEFAULT_TIMESLICE_US = 1000
MAX_TIMESLICE_US = 1_000_000


class SimInputError(ValueError):
    """Bad input for the simulated GPU; the message names the input and what is valid."""


def parse_size(text: str | int, *, name: str = "size") -> int:
    """Bytes from a size in gpuwarden's one syntax (policy.units: "80GiB", "512M", "1.5GiB";
    a bare number is MiB); an int is bytes already."""
    from policy.units import UnitError, parse_size_bytes

    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        try:
            value = parse_size_bytes(str(text))
        except UnitError as err:
            raise SimInputError(f"{name}: {text!r} is not a size: {err}; {err.hint} (a bare "
                                "number is MiB)") from None
    if value <= 0:
        raise SimInputError(f"{name}: {text!r} must be more than 0 bytes")
    return value


def existing_shape(state_path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """(devices, bytes per device, time slice in µs) of the simulated GPU already in
    `state_path`, or None when there is none yet (no file, empty, or not finished)."""
    try:
        with open(state_path, "rb") as f:
            head = f.read(STATE_HEAD.size + 8)
    except OSError:
        return None
    if len(head) < STATE_HEAD.size + 8:
        return None
    magic, _version, ndev, _size, _overhead, slice_ns = STATE_HEAD.unpack_from(head)
    if magic != GWSIM_MAGIC or not 1 <= ndev <= MAX_DEVICES:
        return None
    (total,) = struct.unpack_from("<Q", head, STATE_HEAD.size)
    return ndev, total, slice_ns // 1000


def parse_timeslice(text: str | int, *, name: str = "timeslice_us") -> int:
    """Microseconds of a time slice (0: launch order), from text such as "2000"."""
    try:
        value = int(text) if isinstance(text, int) or str(text).isdigit() else -1
    except ValueError:
        value = -1
    if isinstance(text, bool) or not 0 <= value <= MAX_TIMESLICE_US:
        raise SimInputError(f"{name}: {text!r} is not valid; use an integer number of "
                            f"microseconds from 0 to {MAX_TIMESLICE_US}")
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
    timeslice_us: int | None = None,
    ld_library_path: str | None = None,
) -> dict[str, str]:
    """The variables that make programs use the simulated GPU with state at `state_path`.

    `devices`, `memory` and `timeslice_us` (how long a process holds the GPU while another has
    kernels queued; 0: kernels run in launch order, whoever queued them) apply when the state
    file is created (first use); an existing file keeps its own.  LD_LIBRARY_PATH puts the
    simulated libraries first, before `ld_library_path` (default: this process's
    LD_LIBRARY_PATH).
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
    if timeslice_us is not None:
        env["GPUWARDEN_SIM_TIMESLICE"] = str(parse_timeslice(timeslice_us))
    return env
