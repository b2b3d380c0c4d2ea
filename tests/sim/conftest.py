"""Fixtures for the simulated-driver tests: the C programs, compiled once per session, and
cleanup of the workload processes a test starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cprog import compile_c
from sim_helpers import PROGS, SimProgs, Workload


@pytest.fixture(scope="session")
def sim_progs(tmp_path_factory: pytest.TempPathFactory) -> SimProgs:
    out = tmp_path_factory.mktemp("sim-progs")
    return SimProgs(
        cudactl=compile_c(PROGS / "cudactl.c", out),
        driver_paths=compile_c(PROGS / "driver_paths.c", out),
    )


@pytest.fixture
def workloads() -> Iterator[list[Workload]]:
    """Collects Workloads so that none outlives its test."""
    started: list[Workload] = []
    yield started
    for w in started:
        w.kill()
