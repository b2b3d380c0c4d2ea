"""The state file is created once, race-free, and a foreign or corrupt file is refused with a
clear message (calls then fail with NOT_INITIALIZED / NVML_ERROR_UNINITIALIZED)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cudaprobe import Result
from sim_helpers import nvml_view

PROBE = Path(__file__).resolve().parent / "nvml_probe.py"


def _init(cudaprobe, env) -> Result:
    return cudaprobe.run("init", env=env)


def test_a_foreign_file_is_refused_by_cuda_and_nvml(cudaprobe, sim_gpu) -> None:
    sim_gpu.state_path.write_text("this is somebody else's file\n")
    done = _init(cudaprobe, sim_gpu.env)
    assert done.rc("init") == 3  # CUDA_ERROR_NOT_INITIALIZED
    assert "is not a gpuwarden simulated-GPU state file" in done.stderr
    assert str(sim_gpu.state_path) in done.stderr
    probe = subprocess.run([sys.executable, str(PROBE)], env=sim_gpu.env, capture_output=True,
                           text=True, timeout=60)
    assert probe.returncode != 0 and "Uninitialized" in probe.stderr
    assert sim_gpu.state_path.read_text() == "this is somebody else's file\n"  # untouched


def test_a_corrupt_magic_is_refused(cudaprobe, sim_gpu) -> None:
    assert cudaprobe.run("init", "primary:0", env=sim_gpu.env).ok
    data = bytearray(sim_gpu.state_path.read_bytes())
    data[0] ^= 0xFF
    sim_gpu.state_path.write_bytes(bytes(data))
    done = _init(cudaprobe, sim_gpu.env)
    assert done.rc("init") == 3
    assert "bad magic" in done.stderr


def test_missing_state_variable_is_named(cudaprobe, sim_gpu) -> None:
    env = {k: v for k, v in sim_gpu.env.items() if k != "GPUWARDEN_SIM_STATE"}
    done = _init(cudaprobe, env)
    assert done.rc("init") == 3
    assert done.stderr.count("GPUWARDEN_SIM_STATE is not set") == 1
    assert "gpuwarden sim env" in done.stderr


def test_many_processes_creating_at_once_agree(cudaprobe, sim_gpu) -> None:
    procs = [cudaprobe.start("init", "primary:0", f"alloc:{1 << 20}", env=sim_gpu.env)
             for _ in range(8)]
    for p in procs:
        done = p.finish(timeout=60)
        assert done.ok, (done.rows, done.stderr)
    dev = nvml_view(sim_gpu.env)["devices"][0]
    assert dev["processes"] == [] and dev["used"] == 0  # all exited, all reclaimed
