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
    assert (f"# gpuwarden simulated GPU: 2 × 6GiB, created on first use; state file: {state}"
            in done.stdout)
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
        (["--memory", "80GB?"], "--memory", "512M, 512Mi, 512MiB, 1.5GiB, 3000m"),
        (["--memory", "80GB"], "--memory", "did you mean `80GiB`?"),
        (["--memory", "0"], "--memory", "more than 0 bytes"),
        (["--memory", "-1"], "--memory", "a bare number is MiB"),
        (["--state", "/"], "--state", "path of a state file"),
        (["--timeslice", "2ms"], "--timeslice", "microseconds from 0 to 1000000"),
        (["--timeslice", "-5"], "--timeslice", "microseconds from 0 to 1000000"),
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


@given(st.integers(min_value=1, max_value=1 << 23),
       st.sampled_from(["", "B", "K", "KiB", "M", "MiB", "G", "GiB", "T", "TiB", "m", "g", "Gi"]))
def test_parse_size_is_binary_units_and_a_bare_number_is_mib(n: int, unit: str) -> None:
    shift = {"": 20, "B": 0, "K": 10, "KiB": 10, "M": 20, "MiB": 20, "G": 30, "GiB": 30,
             "T": 40, "TiB": 40, "m": 20, "g": 30, "Gi": 30}[unit]
    assert parse_size(f"{n}{unit}") == n << shift


def test_memory_is_written_as_everywhere_else(tmp_path: Path) -> None:
    """`--memory 3000` is 3000 MiB, as `gpuwarden run --gpumem 3000` and policies read it."""
    for text, nbytes in (("3000", 3000 << 20), ("1.5GiB", 1536 << 20), ("512M", 512 << 20)):
        done = gw("sim", "env", "--memory", text, "--state", str(tmp_path / text))
        assert done.returncode == 0, done.stderr
        assert f"export GPUWARDEN_SIM_MEMORY={nbytes}" in done.stdout


def test_env_passes_the_time_slice_on(tmp_path: Path) -> None:
    done = gw("sim", "env", "--timeslice", "2000", "--state", str(tmp_path / "gpu.state"))
    assert done.returncode == 0, done.stderr
    assert "export GPUWARDEN_SIM_TIMESLICE=2000" in done.stdout


def test_an_existing_gpu_of_another_time_slice_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "gpu.state"
    made = gw("sim", "env", "--timeslice", "2000", "--state", str(state))
    script = made.stdout + f"\n{sys.executable} {REPO}/tests/sim/nvml_probe.py\n"
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUWARDEN_SIM")}
    assert subprocess.run(["bash", "-c", script], env=base, capture_output=True).returncode == 0
    asked = gw("sim", "env", "--timeslice", "0", "--state", str(state))
    assert asked.returncode == 2 and asked.stdout == ""
    assert (f"the simulated GPU in {state} already exists with a time slice of 2000 µs, and you "
            "asked for --timeslice 0") in asked.stderr
    assert f"rm {state}" in asked.stderr and "--state PATH" in asked.stderr
    same = gw("sim", "env", "--state", str(state))  # nothing asked: the existing one's
    assert same.returncode == 0 and "export GPUWARDEN_SIM_TIMESLICE=2000" in same.stdout


def test_an_existing_gpu_of_another_shape_is_refused_not_reused(tmp_path: Path) -> None:
    state = tmp_path / "gpu.state"
    made = gw("sim", "env", "--devices", "2", "--memory", "80GiB", "--state", str(state))
    script = made.stdout + f"\n{sys.executable} {REPO}/tests/sim/nvml_probe.py\n"
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUWARDEN_SIM")}
    assert subprocess.run(["bash", "-c", script], env=base, capture_output=True).returncode == 0
    asked = gw("sim", "env", "--devices", "1", "--memory", "16GiB", "--state", str(state))
    assert asked.returncode == 2 and asked.stdout == ""  # `eval` gets nothing to swallow
    assert (f"the simulated GPU in {state} already exists with 2 × 80GiB, and you asked for "
            "1 GPU of 16GiB") in asked.stderr
    assert f"rm {state}" in asked.stderr and "--state PATH" in asked.stderr
    same = gw("sim", "env", "--state", str(state))  # nothing asked: the existing one, said so
    assert same.returncode == 0
    assert f"# gpuwarden simulated GPU: 2 × 80GiB; state file: {state}" in same.stdout
    assert "export GPUWARDEN_SIM_DEVICES=2" in same.stdout


def test_the_state_head_read_from_python_matches_the_c_layout(tmp_path: Path) -> None:
    from cprog import compile_c

    from libvgpu.sim import (
        DEFAULT_TIMESLICE_US,
        DEVICE_SIZE,
        GWSIM_MAGIC,
        MAX_TIMESLICE_US,
        STATE_HEAD,
    )

    src = tmp_path / "head.c"
    src.write_text("""#include <stddef.h>
#include <stdio.h>
#include "common/simstate.h"
int main(void)
{
    printf("%zu %zu %zu %zu %zu %zu %zu %llu %ld %ld\\n", offsetof(struct gwsim_state, version),
           offsetof(struct gwsim_state, num_devices), offsetof(struct gwsim_state, timeslice_ns),
           offsetof(struct gwsim_state, dev),
           offsetof(struct gwsim_device, total_bytes), sizeof(struct gwsim_device),
           sizeof(((struct gwsim_state *)0)->magic), (unsigned long long)GWSIM_MAGIC,
           GWSIM_DEFAULT_TIMESLICE_US, GWSIM_MAX_TIMESLICE_US);
    return 0;
}
""")
    exe = compile_c(src, tmp_path, extra_flags=[f"-I{REPO / 'libvgpu' / 'sim'}"])
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in got] == [8, 12, STATE_HEAD.size - 8, STATE_HEAD.size, 0, DEVICE_SIZE,
                                     8, GWSIM_MAGIC, DEFAULT_TIMESLICE_US, MAX_TIMESLICE_US]


def test_sim_env_rejects_what_the_c_side_would(tmp_path: Path) -> None:
    with pytest.raises(SimInputError, match="memory: '3 GiB'"):
        sim_env(tmp_path / "s", memory="3 GiB")
    with pytest.raises(SimInputError, match="devices"):
        parse_devices(True)
    env = sim_env(tmp_path / "s", devices=3, memory=5 << 20, ld_library_path="/x")
    assert env["LD_LIBRARY_PATH"].endswith(":/x")
    assert env["GPUWARDEN_SIM_MEMORY"] == str(5 << 20)  # an int is bytes already


def test_the_c_side_refuses_a_bad_size_with_a_clear_message(sim_gpu) -> None:
    env = {**sim_gpu.env, "GPUWARDEN_SIM_MEMORY": "80GB?"}
    done = subprocess.run([sys.executable, str(REPO / "tests/sim/nvml_probe.py")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert 'GPUWARDEN_SIM_MEMORY="80GB?" is not a size' in done.stderr
    assert not sim_gpu.state_path.exists() or sim_gpu.state_path.stat().st_size == 0
    # The same state path works once the input is fixed.
    assert nvml_view(sim_gpu.env)["devices"][0]["total"] == 80 << 30
