"""Helpers of the eBPF audit tests: the stand-in libcuda (csrc/fakecuda.c) and the driver a
test's CUDA test program processes (tests/cudaprobe.py) load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cprog import compile_c

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"


def build_fake_libcuda(out_dir: Path) -> Path:
    return compile_c(
        CSRC / "fakecuda.c",
        out_dir,
        name="libcuda.so.1",
        extra_flags=["-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1"],
    )


@dataclass(frozen=True)
class Driver:
    """A libcuda.so.1 and the environment that makes a process load it."""

    lib: Path
    env: dict[str, str]
