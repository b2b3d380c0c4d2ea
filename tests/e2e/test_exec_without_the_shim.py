"""A process that allocated through libvgpu and then exec()s a program without it keeps its pid,
its start time and so its slot in the region: the real agent (real eBPF, the kernel's exec
events through the proc connector) sees that libvgpu.so is no longer mapped in it, reports
`shim_unloaded` and kills it as a bypass when the new program uses the GPU; a program exec()ed
with the shim kept is left alone, and its new program is charged its own memory only."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import execafter
import pytest
from agent_harness import AgentProc, pid_alive
from testbed.procs import wait_for

pytestmark = [pytest.mark.bpf, pytest.mark.slow]

# The process allocates 512 MiB through the shim, then exec()s gpu_job (64 MiB). The new
# program uses less than the old one was counted, so no memory check (NVML or eBPF above the
# shim's count) can tell: only the look at its maps does.
MIB = 1 << 20
CONTEXT = 300 * MIB  # the simulated driver's context


def _shim_bytes(agent: AgentProc, name: str) -> float | None:
    return agent.metric("gpuwarden_workload_memory_used_bytes", {"pod": name, "source": "shim"})


def _exec_after_the_shim(agent: AgentProc, gpu_job: Path, tmp_path: Path, preload: str,
                         name: str) -> subprocess.Popen[str]:
    """The workload's process once it allocated through the shim, the agent counted that, and
    it was told to exec gpu_job (64 MiB, held 20 s)."""
    go = tmp_path / f"go-{name}"
    p = agent.run(["--namespace", "strict", "--name", name],
                  execafter.argv(512 * MIB, preload, go, gpu_job, "64", "20000"))
    assert p.stdout is not None
    assert p.stdout.readline() == "allocated\n", p.stderr.read() if p.stderr else ""
    wait_for(lambda: _shim_bytes(agent, name) == 512 * MIB + CONTEXT, 30,
             "the agent counting the shim's 512 MiB")
    go.touch()
    return p


def test_an_exec_that_drops_the_shim_is_reported_and_killed_as_a_bypass(
        start_agent, gpu_job: Path, tmp_path: Path) -> None:
    agent: AgentProc = start_agent()
    p = _exec_after_the_shim(agent, gpu_job, tmp_path, "drop", "dropper")
    unloaded = agent.wait_event(lambda e: e.get("event") == "shim_unloaded", timeout=30)
    assert unloaded["pid"] == p.pid and unloaded["workload"]["pod"] == "dropper"
    kill = agent.wait_event(lambda e: e.get("action") == "kill", timeout=30)
    assert kill["verdict"] == "bypass" and kill["results"] == {str(p.pid): "sent"}
    p.communicate(timeout=30)
    assert p.returncode == -9


def test_an_exec_that_keeps_the_shim_is_left_alone(start_agent, gpu_job: Path,
                                                    tmp_path: Path) -> None:
    agent: AgentProc = start_agent()
    p = _exec_after_the_shim(agent, gpu_job, tmp_path, "keep", "keeper")
    assert p.stdout is not None
    line = p.stdout.readline()  # gpu_job's own report once it holds its 64 MiB
    assert "holding 64 MiB" in line, line
    # the new program's shim gave back the old one's slot: only its own memory is counted
    wait_for(lambda: _shim_bytes(agent, "keeper") == 64 * MIB + CONTEXT, 30,
             "the shim's count becoming the new program's")
    # an absence: for three slot periods (each a look at its maps after the exec event)
    deadline = time.monotonic() + 6.0
    while time.monotonic() < deadline:
        events = agent.events()
        assert not [e for e in events if e.get("event") in ("shim_unloaded", "violation",
                                                             "action")], events
        assert pid_alive(p.pid)
        time.sleep(0.2)
    p.kill()
    p.communicate(timeout=30)
