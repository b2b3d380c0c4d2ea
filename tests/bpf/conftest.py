"""Fixtures of the eBPF audit tests: the C driver program (cuda_ops), the libcuda it drives,
and one AuditProbe shared by the tests that only need the default configuration (compiling
the BPF program takes seconds).  Tests tell their processes apart by pid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpf_harness import CSRC, Driver, build_fake_libcuda, compile_c


@pytest.fixture(scope="session")
def cuda_ops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(CSRC / "cuda_ops.c", tmp_path_factory.mktemp("ops") / "cuda_ops", "-ldl")


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    lib = build_fake_libcuda(tmp_path_factory.mktemp("fakecuda"))
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib.parent))
    return Driver(lib, env)


@pytest.fixture(scope="session")
def driver(fake_driver: Driver) -> Driver:
    return fake_driver


@pytest.fixture(scope="session")
def audit(driver: Driver) -> Iterator[object]:
    from bpf.audit import AuditProbe

    with AuditProbe(libs=[driver.lib]) as probe:
        yield probe
