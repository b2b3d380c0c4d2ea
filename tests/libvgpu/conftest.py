"""Fixtures of the libvgpu memory tests: the probe program (tests/libvgpu/progs/memprobe.c) built
in its three linkage modes, and environments that run it on the simulated GPU under the shim."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cprog import compile_c
from memprobe_util import parse

from libvgpu.paths import shim_path, sim_lib_dir

PROGS = Path(__file__).resolve().parent / "progs"


@dataclass
class Probe:
    dlsym: Path
    direct: Path

    def exe(self, mode: str) -> Path:
        return self.direct if mode == "direct" else self.dlsym


@pytest.fixture(scope="session")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    out = tmp_path_factory.mktemp("memprobe")
    dl = compile_c(PROGS / "memprobe.c", out / "dlsym")
    direct = compile_c(
        PROGS / "memprobe.c", out / "direct", link_cuda=True, extra_flags=["-DGW_DIRECT"]
    )
    return Probe(dl, direct)


@dataclass
class ShimRun:
    env: dict[str, str]
    region_path: Path
    probe: Probe

    def run(self, mode: str, *ops: str, **extra_env: str) -> tuple[list[dict[str, str]], str]:
        env = {**self.env, **extra_env}
        res = subprocess.run(
            [str(self.probe.exe(mode)), mode, *ops],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        refused_ctx = res.returncode == 3 and res.stdout.startswith("ctx rc=")
        assert res.returncode == 0 or refused_ctx, (
            f"memprobe failed ({res.returncode}): {res.stderr}"
        )
        return parse(res.stdout), res.stderr

    def spawn(self, mode: str, *ops: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(self.probe.exe(mode)), mode, *ops],
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def shim(sim_gpu, probe: Probe, tmp_path: Path) -> Callable[..., ShimRun]:
    """shim(limit="1g", **env) -> ShimRun: the sim GPU + LD_PRELOAD of libvgpu.so + a fresh
    region file; limit=None leaves CUDA_DEVICE_MEMORY_LIMIT unset."""
    counter = iter(range(1000))

    def make(limit: str | None = "1g", **env: str) -> ShimRun:
        region = tmp_path / f"region-{next(counter)}"
        e = dict(sim_gpu.env)
        e["LD_PRELOAD"] = str(shim_path())
        e["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = str(region)
        e.pop("CUDA_DEVICE_MEMORY_LIMIT", None)
        if limit is not None:
            e["CUDA_DEVICE_MEMORY_LIMIT"] = limit
        e.update(env)
        assert str(sim_lib_dir()) in e["LD_LIBRARY_PATH"]
        return ShimRun(e, region, probe)

    return make
