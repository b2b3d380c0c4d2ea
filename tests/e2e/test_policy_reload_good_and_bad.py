"""Hot reload through the running agent: a good edit changes the exported digest, a bad one is
rejected (error counter, audit event naming file:line:col) while the last good policy keeps
applying to new workloads; an invalid policy at start is refused."""

from __future__ import annotations

from pathlib import Path

from agent_harness import TEST_POLICY, AgentProc, write_policy


def digest(agent: AgentProc) -> str:
    _, text = agent.get("/metrics")
    line = next(ln for ln in text.splitlines() if ln.startswith("gpuwarden_policy_info{"))
    return line.split('digest="')[1].split('"')[0]


def test_reload_good_then_bad(start_agent, tmp_path: Path, gpu_job: Path) -> None:
    pol = write_policy(tmp_path / "pol")
    agent: AgentProc = start_agent("--no-ebpf", policy=[pol])
    first = digest(agent)
    assert len(first) == 64
    n = len(agent.events())
    # good edit, written elsewhere and moved in (how editors and ConfigMaps replace files)
    staged = tmp_path / "staged.gwp"
    staged.write_text(TEST_POLICY.replace("gpumem = 1GiB", "gpumem = 2GiB"))
    staged.rename(pol / "test.gwp")
    ev = agent.wait_event(lambda e: e.get("event") == "policy_reload", after=n)
    assert ev["ok"] and ev["digest"] != first
    second = digest(agent)
    assert second == ev["digest"]
    n = len(agent.events())
    (pol / "test.gwp").write_text(TEST_POLICY.replace("mode = enforce", "mode = strict"))
    ev = agent.wait_event(lambda e: e.get("event") == "policy_reload", after=n)
    assert not ev["ok"] and "test.gwp:" in ev["message"] and "GW" in ev["message"]
    assert digest(agent) == second
    assert agent.metric("gpuwarden_policy_reload_errors_total") == 1
    assert agent.metric("gpuwarden_policy_last_reload_success") == 0
    # the last good policy (2GiB default) still applies to a new workload
    p = agent.run(["--namespace", "demo", "--name", "after-bad"], [gpu_job, "1", "1"])
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0 and "memory 2048 MiB" in err
    status, body = agent.get("/healthz")
    assert status == 200 and '"policy_last_reload_ok": false' in body


def test_invalid_policy_refuses_to_start(start_agent, tmp_path: Path) -> None:
    pol = write_policy(tmp_path / "bad", TEST_POLICY.replace("gpucores = 0%", "gpucores = 7 "))
    agent: AgentProc = start_agent("--no-ebpf", policy=[pol], expect_ready=False)
    assert agent.proc is not None and agent.proc.wait(30) == 1
    err = agent.stderr()
    assert "refusing to start, the policy is invalid" in err and "test.gwp:" in err
