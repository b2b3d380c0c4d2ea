"""Constants and the output parser of the memory probe (tests/libvgpu/progs/memprobe.c).

Tests import these from here, not from conftest: every tests/ folder has a conftest module and
which one `import conftest` finds depends on the order the suite was collected in.
"""

from __future__ import annotations

OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY
MiB, GiB = 2**20, 2**30


def parse(stdout: str) -> list[dict[str, str]]:
    """'free=1 total=2 info rc=0' -> {'op': 'info', 'rc': '0', 'free': '1', 'total': '2'}"""
    rows = []
    for line in stdout.splitlines():
        if line == "holding":
            continue
        parts = line.split()
        row = dict(p.split("=", 1) for p in parts if "=" in p)
        row["op"] = next(p for p in parts if "=" not in p)
        rows.append(row)
    return rows
