"""Fixtures for the compute-limiter tests: the pure controller's C driver, compiled once."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "libvgpu" / "src"
HERE = Path(__file__).resolve().parent
CFLAGS = [
    "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-Wconversion", "-Wshadow",
    "-Wmissing-prototypes", "-Wstrict-prototypes", "-O2", "-g",
]


class Driver:
    """Runs tests/compute/limiter_driver.c (linked with libvgpu/src/limiter.c)."""

    def __init__(self, exe: Path) -> None:
        self.exe = exe

    def run(self, *args: object) -> str:
        done = subprocess.run(
            [str(self.exe), *map(str, args)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"limiter_driver {args}: rc {done.returncode} {done.stderr}"
        return done.stdout

    def fields(self, *args: object) -> dict[str, float]:
        words = self.run(*args).split()
        return {words[i]: float(words[i + 1]) for i in range(0, len(words) - 1, 2)}


@pytest.fixture(scope="session")
def limiter_driver(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (cc) is needed to build tests/compute/limiter_driver.c"
    exe = tmp_path_factory.mktemp("compute") / "limiter_driver"
    cmd = [cc, *CFLAGS, f"-I{SRC}", str(SRC / "limiter.c"), str(HERE / "limiter_driver.c"),
           "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}"
    return Driver(exe)
