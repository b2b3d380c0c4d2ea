"""A process that allocates through the CUDA driver API (libvgpu, when preloaded, claims the
process's slot in its region), prints "allocated", then exec()s another program with LD_PRELOAD
kept or dropped: how the tests of exec() and the shim start one (the agent's maps check, the
shim's and the simulated driver's give-back of the program before)."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["argv"]

PROGRAM = """
import ctypes, os, sys, time
size, preload, wait, *cmd = sys.argv[1:]
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
for rc in (cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(dev), 0),
           cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), cu.cuCtxSetCurrent(ctx),
           cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(size)))):
    assert rc == 0, rc
print("allocated", flush=True)
if wait == "stdin":
    sys.stdin.readline()
elif wait != "-":
    while not os.path.exists(wait):
        time.sleep(0.02)
env = dict(os.environ)
if preload == "drop":
    del env["LD_PRELOAD"]
os.execve(cmd[0], cmd, env)
"""


def argv(alloc_bytes: int, preload: str, wait: str | Path, *cmd: str | Path) -> list[str]:
    """The command line: allocate `alloc_bytes`, wait (`-`: not at all; `stdin`: for a line on
    stdin; else for the file `wait` to exist), then exec `cmd` with LD_PRELOAD `preload` ("keep"
    or "drop")."""
    if preload not in ("keep", "drop"):
        raise ValueError(f"preload {preload!r}: expected keep or drop")
    return [sys.executable, "-c", PROGRAM, str(alloc_bytes), preload, str(wait),
            *(str(c) for c in cmd)]
