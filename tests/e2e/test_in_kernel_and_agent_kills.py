"""Kill with no grace: the eBPF kill limit stops a bypassing process inside the allocation that
crosses its limit (that allocation never returns); a bypass within the limit is killed by the
agent; --dry-run and audit-mode rules only record would_kill."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_harness import AgentProc, pid_alive

pytestmark = [pytest.mark.bpf, pytest.mark.slow]


def test_crossing_allocation_never_returns(start_agent, gpu_job: Path, tmp_path: Path) -> None:
    agent: AgentProc = start_agent()
    # The job allocates only once the kill limit is armed for it (the gate file).
    gate = tmp_path / "armed"
    p = agent.run(["--namespace", "strict", "--name", "crosser", "--gpumem", "1GiB"],
                  ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; "
                               f"exec {gpu_job} --bypass 2048 5000 256"])
    agent.wait_event(lambda e: e.get("event") == "kernel_kill_limit" and p.pid in e["pids"],
                     timeout=30)
    gate.touch()
    out, _ = p.communicate(timeout=30)
    assert p.returncode == -9 and "holding" not in out
    kk = agent.wait_event(lambda e: e.get("action") == "kernel_kill")
    assert kk["workload"]["pod"] == "crosser" and kk["pids"] == [p.pid]
    assert kk["limit_bytes"] == (1 << 30) + (64 << 20)


def test_bypass_within_limit_is_killed_by_the_agent(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent()
    p = agent.run(["--namespace", "strict", "--name", "small"],
                  [gpu_job, "--bypass", "64", "20000"])
    p.communicate(timeout=30)
    assert p.returncode == -9
    ev = agent.wait_event(lambda e: e.get("action") == "kill")
    assert ev["verdict"] == "bypass" and ev["results"] == {str(p.pid): "sent"}


def test_dry_run_and_audit_mode_only_record(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent("--dry-run")
    p = agent.run(["--namespace", "strict", "--name", "dry"],
                  [gpu_job, "--bypass", "64", "2500"])
    ev = agent.wait_event(lambda e: e.get("action") == "would_kill")
    assert ev["workload"]["pod"] == "dry" and "results" not in ev
    assert pid_alive(p.pid)
    p.communicate(timeout=30)
    assert p.returncode == 0
    assert not [e for e in agent.events() if e.get("event") == "kernel_kill_limit"]
    assert agent.metric("gpuwarden_actions_total", {"pod": "dry", "action": "would_kill"}) == 1


def test_audit_mode_rule_never_signals(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent()
    p = agent.run(["--namespace", "watch", "--name", "audited"],
                  [gpu_job, "--bypass", "64", "4000"])
    agent.wait_event(lambda e: e.get("action") == "would_terminate")
    agent.wait_event(lambda e: e.get("action") == "would_kill")  # past the 2 s grace
    p.communicate(timeout=30)
    assert p.returncode == 0
