"""The per-container region folder on the host: created with its limits, or its limits written
again into an existing region (a restart, a second prepare). Shared by the device plugin and
the DRA driver (one definition of what a new slice's region holds)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from gpuwarden.limit import MemoryLimit

__all__ = ["REGION_FILE", "write_region"]

REGION_FILE = "vgpu.region"


def write_region(folder: Path, devices: Sequence[tuple[str, MemoryLimit]],
                 cores: Sequence[int]) -> list[Path]:
    """Make `folder` (world-writable: the container's user, whoever it is, writes its region)
    and its region with each (GPU UUID, memory limit) and compute limit (0 = none); returns
    what it created, for undo. On failure nothing it created is left and the error is
    raised."""
    from libvgpu.region import Region

    made = [] if folder.exists() else [folder]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o777)
        path = folder / REGION_FILE
        if path.exists() and path.stat().st_size:
            with Region.open(path) as r:
                for (uuid, lim), c in zip(devices, cores, strict=True):
                    r.set_memory_limit(uuid, lim.bytes)
                    r.set_compute_limit(uuid, c)
        else:
            with Region.create(path, [(uuid, lim.bytes) for uuid, lim in devices]) as r:
                for (uuid, _), c in zip(devices, cores, strict=True):
                    r.set_compute_limit(uuid, c)
        os.chmod(path, 0o666)
    except BaseException:
        for p in made:
            shutil.rmtree(p, ignore_errors=True)
        raise
    return made
