#!/usr/bin/env python3
"""A stand-in for a training job, for trying gpuwarden without PyTorch: it reaches the GPU as the
CUDA runtime does (dlopen("libcuda.so.1"), then its functions), takes device memory in steps,
holds it, and reports what it got.

    python3 examples/train.py [--mib N] [--step-mib N] [--seconds N]

Defaults: 2048 MiB in steps of 256 MiB, held 3 s. Exit status 0 when it got everything, 3 when
the GPU (or its slice) ran out of memory first, 2 when there is no GPU (on a machine without
one, first `eval "$(gpuwarden sim env)"`). Runs on a real NVIDIA GPU and on gpuwarden's
simulated one.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

MIB = 1 << 20


def mib(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of MiB above 0")
    return int(text) * MIB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", dest="mem", type=mib, default=2048 * MIB,
                    help="MiB of device memory to take (default 2048)")
    ap.add_argument("--step-mib", dest="step", type=mib, default=256 * MIB,
                    help="MiB per allocation (default 256)")
    ap.add_argument("--seconds", type=float, default=3.0, help="how long to hold it (3)")
    args = ap.parse_args()
    me = f"train.py[{os.getpid()}]"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        print(f"{me}: no CUDA driver ({err}); without a GPU run "
              "`eval \"$(gpuwarden sim env)\"` first", file=sys.stderr)
        return 2
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    if (cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), 0)
            or cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)):
        print(f"{me}: no CUDA device", file=sys.stderr)
        return 2
    got: list[ctypes.c_uint64] = []
    held = 0
    while held < args.mem:
        step = min(args.step, args.mem - held)
        ptr = ctypes.c_uint64()
        if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(step)) != 0:
            print(f"{me}: out of memory after {held // MIB} MiB of {args.mem // MIB} MiB")
            return 3
        got.append(ptr)
        held += step
    print(f"{me}: holding {held // MIB} MiB for {args.seconds:g} s", flush=True)
    time.sleep(args.seconds)
    for ptr in got:
        cuda.cuMemFree_v2(ptr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
