"""Fixtures of the libvgpu memory tests: environments that run the CUDA test program
(tests/progs/cudaprobe.c) on the simulated GPU under the shim, reaching the driver through
dlsym, cuGetProcAddress or direct linking."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cudaprobe import CudaProbe, Result, Row, Running

from libvgpu.paths import shim_path, sim_lib_dir


@dataclass
class ShimRun:
    """One shim configuration.  Scripts start with `init` and the primary context of device 0
    (or the created context a script asks for with `ctx:0` as its first operation)."""

    env: dict[str, str]
    region_path: Path
    probe: CudaProbe

    @staticmethod
    def script(*ops: str) -> list[str]:
        return ["init", *(() if ops and ops[0].startswith("ctx:") else ("primary:0",)), *ops]

    def result(self, mode: str, *ops: str, timeout: float = 60, **extra_env: str) -> Result:
        """The whole run, the init and context rows included (for tests of refused contexts)."""
        env = {**self.env, **extra_env}
        return self.probe.run(*self.script(*ops), env=env, entry=mode, timeout=timeout)

    def run(self, mode: str, *ops: str, **extra_env: str) -> tuple[list[Row], str]:
        """The rows of `ops` and stderr; the context must have been made."""
        res = self.result(mode, *ops, **extra_env)
        init, ctx, *rows = res.rows
        assert init["rc"] == ctx["rc"] == "0", f"no context: {res.rows}\n{res.stderr}"
        return rows, res.stderr

    def spawn(self, mode: str, *ops: str) -> Running:
        return self.probe.start(*self.script(*ops), env=self.env, entry=mode)


@pytest.fixture
def shim(sim_gpu, cudaprobe: CudaProbe, tmp_path: Path) -> Callable[..., ShimRun]:
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
        return ShimRun(e, region, cudaprobe)

    return make
