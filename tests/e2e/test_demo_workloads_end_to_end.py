"""The three demo workloads on the simulated GPU with real eBPF: one within its limits runs to
the end untouched; one over its memory through the shim gets a normal out-of-memory error and no
action; one bypassing the shim is caught (verdict "bypass") and killed."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_harness import AgentProc

pytestmark = [pytest.mark.bpf, pytest.mark.slow]


def test_three_workloads(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent()
    ok = agent.run(["--namespace", "demo", "--name", "within", "--gpumem", "1GiB"],
                   [gpu_job, "256", "1500"])
    oom = agent.run(["--namespace", "demo", "--name", "over", "--gpumem", "1GiB"],
                    [gpu_job, "2048", "200", "256"])
    out, err = oom.communicate(timeout=30)
    assert oom.returncode == 3, (out, err)
    assert "out of memory after" in out and "of 2048" in out
    bypass = agent.run(["--namespace", "strict", "--name", "bypass", "--gpumem", "1GiB"],
                       [gpu_job, "--bypass", "256", "30000"])
    _, _ = bypass.communicate(timeout=30)
    assert bypass.returncode == -9  # SIGKILL: the exec'ed workload is the run process itself
    out, err = ok.communicate(timeout=30)
    assert ok.returncode == 0 and "holding 256 MiB" in out, (out, err)

    events = agent.events()
    kills = [e for e in events if e.get("action") == "kill"]
    assert len(kills) == 1 and kills[0]["workload"]["pod"] == "bypass"
    assert kills[0]["verdict"] == "bypass" and kills[0]["results"] == {
        str(bypass.pid): "sent"}
    assert kills[0]["evidence"]["ebpf"] >= 256 << 20 and kills[0]["evidence"]["shim"] == 0
    assert not [e for e in events if e.get("event") in ("violation", "action")
                and e["workload"]["pod"] in ("within", "over")]
    for pod in ("within", "over", "bypass"):  # every workload is cleaned up at its exit
        agent.wait_event(lambda e, pod=pod: e.get("event") == "workload_exited"
                         and e["workload"]["pod"] == pod)
    assert not list((agent.state_dir / "regions").iterdir())
    assert not list((agent.state_dir / "workloads").iterdir())
    assert agent.metric("gpuwarden_violations_total", {  # what the test policy names
        "pod": "bypass", "check": "bypass", "policy_rule": "strict", "alert": "StrictViolation",
        "severity": "critical"}) == 1
    assert agent.metric("gpuwarden_actions_total", {"pod": "bypass", "action": "kill"}) == 1
    assert agent.metric("gpuwarden_ebpf_up") == 1


def test_denied_workload_gets_a_clear_message(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf")
    p = agent.run(["--namespace", "sandbox-1", "--name", "x"], [gpu_job, "1", "1"])
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1 and out == ""
    assert "sandbox-1/x: denied by policy: GPU use in sandbox namespaces needs approval" in err
