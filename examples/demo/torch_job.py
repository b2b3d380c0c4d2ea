"""PyTorch workload for the demo on a real GPU: same arguments as gpu_job.

    torch_job.py [--bypass] ALLOC_MIB HOLD_MS [CHUNK_MIB]

Allocates ALLOC_MIB of tensors in CHUNK_MIB steps on cuda:0, holds them HOLD_MS ms, exits 0;
out of memory: prints it and exits 3. --bypass re-executes itself without LD_PRELOAD first.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    args = argv[1:]
    bypass = bool(args) and args[0] == "--bypass"
    if bypass:
        args = args[1:]
        if os.environ.pop("LD_PRELOAD", None) is not None:
            os.execv(sys.executable, [sys.executable, *argv])
    total, hold = int(args[0]), int(args[1])
    chunk = int(args[2]) if len(args) > 2 else total
    import torch

    held = []
    done = 0
    try:
        while done < total:
            step = min(chunk, total - done)
            held.append(torch.empty(step << 20, dtype=torch.uint8, device="cuda:0"))
            done += step
    except torch.cuda.OutOfMemoryError as err:
        print(f"torch_job[{os.getpid()}]: out of memory after {done} MiB of {total}: "
              f"{str(err).splitlines()[0]}", flush=True)
        return 3
    print(f"torch_job[{os.getpid()}]: holding {done} MiB for {hold} ms"
          f"{' (bypassing the shim)' if bypass else ''}", flush=True)
    time.sleep(hold / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
