"""A region file corrupted under a running workload: a clear error (audit event naming the file
and what is wrong, a counter), the workload stays handled by its rule, the agent keeps running
and admitting; `gpuwarden top` shows every workload and whether the sources agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_harness import REPO, AgentProc
from testbed.procs import wait_for


def top_once(agent: AgentProc) -> str:
    done = subprocess.run([sys.executable, "-m", "gpuwarden", "top", "--once", "--state-dir",
                           str(agent.state_dir)], capture_output=True, text=True, cwd=REPO,
                          env=agent.env, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_corrupt_region_is_reported_and_agent_keeps_running(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf")
    w = agent.run(["--namespace", "demo", "--name", "victim", "--gpumem", "1GiB"],
                  [gpu_job, "128", "8000"])
    adm = agent.wait_event(lambda e: e.get("event") == "workload_admitted")
    wait_for(lambda: "demo/victim" in (t := top_once(agent)) and " yes " in t, 15,
             "`gpuwarden top` showing demo/victim running the shim")
    region = agent.state_dir / "regions" / f"{adm['workload']['id']}.region"
    with region.open("r+b") as f:
        f.write(b"\0" * 8)  # the magic
    ev = agent.wait_event(lambda e: e.get("event") == "region_error")
    assert str(region) in ev["error"] and "magic" in ev["error"]
    assert ev["workload"]["pod"] == "victim"
    assert agent.metric("gpuwarden_region_errors_total") == 1
    status, body = agent.get("/healthz")
    assert status == 200 and json.loads(body)["ok"]
    assert agent.metric("gpuwarden_workload_sources_agree", {"pod": "victim"}) == 0
    assert " NO " in top_once(agent)
    other = agent.run(["--namespace", "demo", "--name", "after"], [gpu_job, "16", "10"])
    other.communicate(timeout=30)
    assert other.returncode == 0
    w.communicate(timeout=30)
    assert w.returncode == 0  # within its limit by NVML: not touched
    assert not [e for e in agent.events() if e.get("event") == "action"]
