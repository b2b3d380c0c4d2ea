"""One agent per state folder: a second agent on the same folder refuses to start with an error
naming the folder and the running agent's pid, and leaves the first one's control socket alone;
the folder is free again once the first agent has closed (or died: the lock is an flock)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.control import ControlServer, request
from agent.daemon import Agent, AgentConfig
from agent.ledger import AgentAlreadyRunning

POLICY = "version 1\n\ndefaults {\n  gpumem = 1GiB\n}\n"


def _agent(tmp_path: Path, nvml) -> Agent:
    (tmp_path / "p.gwp").write_text(POLICY)
    cfg = AgentConfig(policy_paths=[str(tmp_path / "p.gwp")], state_dir=tmp_path / "state",
                      ebpf=False)
    return Agent(cfg, nvml_lib=nvml)


def test_a_second_agent_on_the_same_state_folder_refuses_to_start(tmp_path: Path,
                                                                  no_nvml) -> None:
    first = _agent(tmp_path, no_nvml)
    first.start()
    control = ControlServer(first.ledger.socket_path, first)
    control.start()
    try:
        second = _agent(tmp_path, no_nvml)
        with pytest.raises(AgentAlreadyRunning) as err:
            second.start()
        assert str(tmp_path / "state") in str(err.value)
        assert f"pid {os.getpid()}" in str(err.value)
        assert request(first.ledger.socket_path, {"op": "status"}, timeout=5)["ok"]
    finally:
        control.close()
        first.close()
    third = _agent(tmp_path, no_nvml)
    third.start()  # the folder is free again
    third.close()


def test_the_command_line_says_why_and_exits_2(tmp_path: Path, no_nvml) -> None:
    first = _agent(tmp_path, no_nvml)
    first.start()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "gpuwarden", "agent", "--policy", str(tmp_path / "p.gwp"),
             "--state-dir", str(tmp_path / "state"), "--no-ebpf"],
            capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res.stderr
        assert "another gpuwarden agent" in res.stderr and "Traceback" not in res.stderr
    finally:
        first.close()


class ForkingProbe:
    """Stands for the eBPF probe whose close(exiting=True) forks a child that finishes the slow
    teardown (the child inherits the agent's open files)."""

    def __init__(self) -> None:
        self.child = 0

    def close(self, exiting: bool = False) -> None:
        self.child = os.fork()
        if self.child == 0:  # the teardown child: lives on a while, then leaves
            import time

            time.sleep(3)
            os._exit(0)


def test_the_folder_is_free_at_once_after_a_stop_even_with_a_teardown_child(
        tmp_path: Path, no_nvml) -> None:
    first = _agent(tmp_path, no_nvml)
    first.start()
    probe = ForkingProbe()
    first.sources.ebpf = probe
    first.close(exiting=True)
    assert probe.child > 0, "close(exiting=True) never handed the probe's teardown over"
    try:
        second = _agent(tmp_path, no_nvml)
        second.start()  # not refused while the teardown child still runs
        second.close()
    finally:
        os.kill(probe.child, 9)
        os.waitpid(probe.child, 0)
