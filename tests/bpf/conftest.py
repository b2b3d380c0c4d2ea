"""Fixtures of the eBPF audit tests: the libcuda the CUDA test program (tests/cudaprobe.py)
drives, and one AuditProbe shared by the tests that only need the default configuration (compiling
the BPF program takes seconds).  Tests tell their processes apart by pid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from bpf_harness import Driver, build_fake_libcuda


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    lib = build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib.parent))
    return Driver(lib, env)


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    """The simulated driver (libvgpu/sim) with 4 devices; kernels take no simulated time."""
    from libvgpu.paths import sim_lib_dir
    from libvgpu.sim import sim_env

    state = tmp_path_factory.mktemp("sim") / "sim.state"
    env = dict(os.environ)
    env.update(sim_env(state, devices=4, memory="80GiB", kernel_scale=0.0))
    return Driver(sim_lib_dir() / "libcuda.so.1", env)


@pytest.fixture(scope="session")
def audit(driver: Driver, fake_driver: Driver) -> Iterator[object]:
    """One probe on both the simulated driver and the fake one."""
    from bpf.audit import AuditProbe

    with AuditProbe(libs=[driver.lib, fake_driver.lib]) as probe:
        yield probe
