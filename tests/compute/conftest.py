"""Fixtures for the compute-limiter tests: the pure controller's C driver, compiled once."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
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
    """Runs tests/compute/limiter_driver.c (linked with libvgpu/src/limiter.c and size.c)."""

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
    from cprog import compile_c

    exe = compile_c(HERE / "limiter_driver.c", tmp_path_factory.mktemp("compute"),
                    extra_flags=[*CFLAGS, f"-I{SRC}"], sources=[SRC / "limiter.c", SRC / "size.c"],
                    libs=["-lm"])
    return Driver(exe)


# ---- the shim on the simulated GPU ----------------------------------------------------------


class Loop:
    """tests/compute/progs/launch_loop.c, run with libvgpu preloaded on a simulated GPU; `meter`
    is tests/compute/progs/stall_meter.c, which rounds.judged_runs runs beside a scenario."""

    def __init__(self, exe: Path, node_region: Path, meter: Path) -> None:
        self.exe = exe
        self.node_region = node_region
        self.meter = meter

    def fresh(self, name: str) -> Loop:
        """The same program with a node region of its own, for one more run of a scenario (a
        node region keeps the slots of exited processes until they go stale)."""
        return Loop(self.exe, self.node_region.with_name(f"{name}.node.region"), self.meter)

    def env(self, sim_env: dict[str, str], **extra: str) -> dict[str, str]:
        from libvgpu.paths import shim_path

        env = dict(sim_env)
        for name in ("CUDA_DEVICE_SM_LIMIT", "GPU_CORE_UTILIZATION_POLICY", "CUDA_TASK_PRIORITY",
                     "CUDA_DEVICE_MEMORY_SHARED_CACHE", "LAUNCH_LOOP_TIMES", "LIBCUDA_LOG_LEVEL",
                     "GPUWARDEN_SIM_SYNC"):
            env.pop(name, None)
        env["LD_PRELOAD"] = str(shim_path())
        env["GPUWARDEN_NODE_REGION"] = str(self.node_region)
        # waits asleep unless a test says otherwise: `auto` (the default) would follow how long
        # the launching thread waits for this machine's CPUs, which a test cannot hold still
        env["GPUWARDEN_GATE_WAIT"] = "sleep"
        env.update(extra)
        return env

    def start(self, sim_env: dict[str, str], path: str, grid: int, seconds: float, *,
              prefix: Sequence[str] = (), **extra: str) -> subprocess.Popen[str]:
        """`prefix`: a command the loop runs under (it gets the loop's command as arguments)."""
        return subprocess.Popen(
            [*prefix, str(self.exe), path, str(grid), str(seconds)],
            env=self.env(sim_env, **extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def result(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, float | str]:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"launch_loop failed (rc {proc.returncode}):\n{err}"
        fields: dict[str, float | str] = {"stderr": err}
        for word in out.split():
            key, _, value = word.partition("=")
            fields[key] = float(value)
        return fields

    def run(self, sim_env: dict[str, str], path: str, grid: int, seconds: float, *,
            prefix: Sequence[str] = (), **extra: str) -> dict[str, float | str]:
        return self.result(self.start(sim_env, path, grid, seconds, prefix=prefix, **extra))


@pytest.fixture(scope="session")
def loop_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from libvgpu.paths import shim_path, sim_lib_dir

    shim_path(), sim_lib_dir()  # a clear error when `make -C libvgpu` was not run
    from cprog import compile_c

    return compile_c(HERE / "progs" / "launch_loop.c", tmp_path_factory.mktemp("compute-progs"),
                     extra_flags=CFLAGS)


@pytest.fixture(scope="session")
def stall_meter_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cprog import compile_c

    return compile_c(HERE / "progs" / "stall_meter.c", tmp_path_factory.mktemp("compute-meter"),
                     extra_flags=CFLAGS)


@pytest.fixture
def loop(loop_exe: Path, stall_meter_exe: Path, tmp_path: Path) -> Loop:
    """launch_loop with a node region of its own (fresh per test)."""
    return Loop(loop_exe, tmp_path / "node.region", stall_meter_exe)
