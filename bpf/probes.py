"""The probe table: which libcuda symbol gets which BPF function (bpf/progs/audit.c).

Read from the one table of CUDA entry points (libvgpu/include/hooks.def, `VGPU_CUDA_PROBE`
rows); the loader attaches from it and the documentation (docs/bpf.md) describes it.  Pure
data: the only file read is that table, once, at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from libvgpu.entry_points import rows

__all__ = ["PROBES", "REQUIRED_SYMBOLS", "Family", "Probe"]


class Family(Enum):
    ALLOC = "alloc"
    FREE = "free"
    CONTEXT = "context"
    LAUNCH = "launch"


@dataclass(frozen=True)
class Probe:
    symbol: str
    family: Family
    entry: str
    ret: str | None = None


# The rows of VGPU_CUDA_PROBE in libvgpu/include/hooks.def, the one table of CUDA entry points.
PROBES: tuple[Probe, ...] = tuple(
    Probe(name, Family(family), entry, None if ret == "none" else ret)
    for name, family, entry, ret in rows("VGPU_CUDA_PROBE"))

# A library is only worth attaching to if it has these: the core of the ledger.
REQUIRED_SYMBOLS: tuple[str, ...] = ("cuMemAlloc_v2", "cuMemFree_v2")
