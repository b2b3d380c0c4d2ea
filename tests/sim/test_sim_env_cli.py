"""`gpuwarden sim env` prints shell-quoted export lines that work; bad input exits 2 with a
message naming the flag and what is valid.  `sim_env`/`parse_size` agree with the C side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_helpers import nvml_view

from libvgpu.sim import SimInputError, parse_devices, parse_size, sim_env

REPO = Path(__file__).resolve().parents[2]


def gw(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwarden", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_env_prints_exports_a_shell_can_eval(tmp_path: Path) -> None:
    state = tmp_path / "dir with space" / "gpu.state"
    state.parent.mkdir()
    done = gw("sim", "env", "--devices", "2", "--memory", "6GiB", "--state", str(state))
    assert done.returncode == 0, done.stderr
    assert f"# gpuwarden simulated GPU; state file: {state}" in done.stdout
    script = done.stdout + "\n" + f"{sys.executable} {REPO}/tests/sim/nvml_probe.py\n"
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUWARDEN_SIM")}
    ran = subprocess.run(["bash", "-c", script], env=base, capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert '"total": 6442450944' in ran.stdout and ran.stdout.count('"index"') == 2
    assert state.exists()


@pytest.mark.parametrize(
    ("args", "flag", "valid"),
    [
        (["--devices", "0"], "--devices", "integer from 1 to 8"),
        (["--devices", "9"], "--devices", "integer from 1 to 8"),
        (["--devices", "two"], "--devices", "integer from 1 to 8"),
        (["--memory", "80GB?"], "--memory", "KiB, MiB, GiB or TiB"),
        (["--memory", "0"], "--memory", "more than 0 bytes"),
        (["--memory", "1.5GiB"], "--memory", "KiB, MiB, GiB or TiB"),
        (["--memory", "-1"], "--memory", "KiB, MiB, GiB or TiB"),
        (["--state", "/"], "--state", "path of a state file"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(args: list[str], flag: str, valid: str) -> None:
    done = gw("sim", "env", *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert flag in done.stderr and valid in done.stderr
    assert repr(args[1]) in done.stderr


def test_sim_without_subcommand_prints_help_and_exits_2() -> None:
    done = gw("sim")
    assert done.returncode == 2 and "env" in done.stdout and "smoke" in done.stdout


@given(st.integers(min_value=1, max_value=1 << 40),
       st.sampled_from(["", "B", "K", "KiB", "M", "MiB", "G", "GiB", "T", "TiB"]))
def test_parse_size_is_binary_units(n: int, unit: str) -> None:
    shift = {"": 0, "B": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20, "G": 30, "GiB": 30,
             "T": 40, "TiB": 40}[unit]
    assert parse_size(f"{n}{unit}") == n << shift


def test_sim_env_rejects_what_the_c_side_would(tmp_path: Path) -> None:
    with pytest.raises(SimInputError, match="memory: '3 GiB'"):
        sim_env(tmp_path / "s", memory="3 GiB")
    with pytest.raises(SimInputError, match="devices"):
        parse_devices(True)
    env = sim_env(tmp_path / "s", devices=3, memory=5 << 20, ld_library_path="/x")
    assert env["LD_LIBRARY_PATH"].endswith(":/x")
    assert env["GPUWARDEN_SIM_MEMORY"] == str(5 << 20)


def test_the_c_side_refuses_a_bad_size_with_a_clear_message(sim_gpu) -> None:
    env = {**sim_gpu.env, "GPUWARDEN_SIM_MEMORY": "80GB?"}
    done = subprocess.run([sys.executable, str(REPO / "tests/sim/nvml_probe.py")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert 'GPUWARDEN_SIM_MEMORY="80GB?" is not a size' in done.stderr
    assert not sim_gpu.state_path.exists() or sim_gpu.state_path.stat().st_size == 0
    # The same state path works once the input is fixed.
    assert nvml_view(sim_gpu.env)["devices"][0]["total"] == 80 << 30
