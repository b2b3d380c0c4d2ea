"""Fixtures for the simulated-driver tests: the driver conformance checks (progs/driver_paths.c),
compiled once per session, and cleanup of the CUDA test program processes a test starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cprog import compile_c
from cudaprobe import Running
from sim_helpers import PROGS


@pytest.fixture(scope="session")
def driver_paths(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(PROGS / "driver_paths.c", tmp_path_factory.mktemp("sim-progs"))


@pytest.fixture
def workloads() -> Iterator[list[Running]]:
    """Collects started cudaprobe processes so that none outlives its test."""
    started: list[Running] = []
    yield started
    for w in started:
        w.kill()
