"""Every simulated driver entry point, good paths and the real driver's error codes.

The checks themselves are C (progs/driver_paths.c, reached through dlopen + dlsym like the CUDA
runtime); this test runs them on a fresh 1 GiB device without context overhead so the memory
numbers are exact, on the release build and, when it is built, under AddressSanitizer.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from libvgpu.paths import LIBVGPU_DIR, NotBuiltError, sim_lib_dir


def _run(exe: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**env, "GPUWARDEN_SIM_MEMORY": "1GiB", "GPUWARDEN_SIM_CTX_OVERHEAD": "0"}
    return subprocess.run([str(exe)], env=env, capture_output=True, text=True,
                          timeout=120)


def test_every_entry_point_returns_the_real_drivers_codes(driver_paths, sim_gpu) -> None:
    done = _run(driver_paths, sim_gpu.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed 0" in done.stdout
    checked = int(done.stdout.split("checked ")[1].split(",")[0])
    assert checked > 300


def test_the_checks_fail_on_a_device_of_another_size(driver_paths, sim_gpu) -> None:
    env = {**sim_gpu.env}
    done = subprocess.run([str(driver_paths)],
                          env={**env, "GPUWARDEN_SIM_MEMORY": "3GiB",
                               "GPUWARDEN_SIM_CTX_OVERHEAD": "0"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "expected total == 1 * GiB" in done.stdout


@pytest.mark.slow
def test_entry_points_are_clean_under_address_sanitizer(driver_paths, sim_gpu) -> None:
    try:
        asan_dir = sim_lib_dir(asan=True)
    except NotBuiltError:  # scripts/setup.sh builds the release libraries only
        subprocess.run(["make", "-s", "-C", str(LIBVGPU_DIR), "asan"], check=True,
                       capture_output=True, timeout=300)
        asan_dir = sim_lib_dir(asan=True)
    runtimes = []
    for lib in ("libasan.so", "libubsan.so"):
        path = subprocess.run(["cc", f"-print-file-name={lib}"], capture_output=True,
                              text=True, check=True).stdout.strip()
        runtimes.append(path)
    env = {**sim_gpu.env, "LD_LIBRARY_PATH": str(asan_dir), "LD_PRELOAD": " ".join(runtimes),
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    done = _run(driver_paths, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed 0" in done.stdout
    assert "ERROR: AddressSanitizer" not in done.stderr
    assert "runtime error" not in done.stderr
