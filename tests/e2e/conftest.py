"""Fixtures for end-to-end tests: the demo's gpu_job binary and a started agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agent_harness import AgentProc, build_gpu_job, write_policy


@pytest.fixture(scope="session")
def gpu_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gpu_job(tmp_path_factory.mktemp("gpu_job"))


@pytest.fixture
def start_agent(tmp_path: Path, sim_gpu: object) -> Iterator[Callable[..., AgentProc]]:
    agents: list[AgentProc] = []

    def start(*extra: str, policy: list[Path] | None = None, state: str = "state",
              expect_ready: bool = True) -> AgentProc:
        pol = policy or [write_policy(tmp_path / "policy")]
        a = AgentProc(tmp_path / state, pol, sim_gpu.env, extra)
        agents.append(a)
        return a.start(expect_ready=expect_ready)

    yield start
    for a in agents:
        a.stop()
