"""Children belong to their workload: a grandchild that bypasses the shim is attributed to the
workload that `gpuwarden run` started (through fork events), here with eBPF off, so the
verdict rests on NVML alone and the agent runs without eBPF (and says so)."""

from __future__ import annotations

import json
from pathlib import Path

from agent_harness import AgentProc


def test_grandchild_bypass_is_the_workloads(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf")
    status, body = agent.get("/healthz")
    assert status == 200 and json.loads(body)["ebpf"].startswith("off: disabled")
    assert agent.metric("gpuwarden_ebpf_up") == 0
    # run -> sh -> sh -> gpu_job (re-exec'ed without the shim)
    p = agent.run(["--namespace", "demo", "--name", "tree", "--label", "team=nlp"],
                  ["sh", "-c", f"sh -c '{gpu_job} --bypass 64 20000; true'; true"])
    ev = agent.wait_event(lambda e: e.get("event") == "violation", timeout=20)
    assert ev["workload"]["pod"] == "tree" and ev["verdict"] == "bypass"
    assert ev["evidence"]["ebpf"] is None and ev["evidence"]["nvml"] > 0
    (culprit,) = ev["pids"][-1:]
    assert culprit != p.pid and len(ev["pids"]) == 3  # run's sh, the inner sh, gpu_job
    # the rule says kill after 2 s: SIGTERM to the whole workload first
    term = agent.wait_event(lambda e: e.get("action") == "terminate", timeout=20)
    assert term["results"] == {str(x): "sent" for x in ev["pids"]}
    p.communicate(timeout=30)
    assert p.returncode == -15


def test_unmanaged_gpu_process_is_reported_not_owned(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf")
    import subprocess

    stranger = subprocess.Popen([str(gpu_job), "64", "4000"], env=agent.env,
                                stdout=subprocess.DEVNULL)
    ev = agent.wait_event(lambda e: e.get("event") == "violation", timeout=20)
    assert ev["workload"]["pod"] == "unmanaged" and ev["pids"] == [stranger.pid]
    assert ev["rule"] == "unmanaged" and ev["verdict"] == "memory"
    stranger.wait(30)
    assert stranger.returncode == 0  # the test policy's unmanaged block only alerts


def test_audit_unmanaged_never_signals_strangers(start_agent, gpu_job: Path,
                                                 tmp_path: Path) -> None:
    import subprocess

    from agent_harness import TEST_POLICY, write_policy

    harsh = TEST_POLICY.replace(
        'on_violation = alert "UnmanagedGpuProcess" severity warning',
        'on_violation = kill after 0s alert "UnmanagedGpuProcess" severity critical')
    agent: AgentProc = start_agent("--no-ebpf", "--audit-unmanaged",
                                   policy=[write_policy(tmp_path / "harsh", harsh)])
    stranger = subprocess.Popen([str(gpu_job), "64", "3000"], env=agent.env,
                                stdout=subprocess.DEVNULL)
    ev = agent.wait_event(lambda e: e.get("action") == "would_kill", timeout=20)
    assert ev["pids"] == [stranger.pid] and ev["workload"]["pod"] == "unmanaged"
    stranger.wait(30)
    assert stranger.returncode == 0


def test_protected_process_name_is_never_touched(start_agent, gpu_job: Path,
                                                 tmp_path: Path) -> None:
    import subprocess
    import time

    from agent_harness import TEST_POLICY, write_policy

    harsh = TEST_POLICY.replace(
        'on_violation = alert "UnmanagedGpuProcess" severity warning',
        'on_violation = kill after 0s alert "UnmanagedGpuProcess" severity critical')
    agent: AgentProc = start_agent("--no-ebpf", "--protect", "gpu_job",
                                   policy=[write_policy(tmp_path / "harsh", harsh)])
    stranger = subprocess.Popen([str(gpu_job), "64", "3500"], env=agent.env,
                                stdout=subprocess.PIPE, text=True)
    assert stranger.stdout is not None and "holding" in stranger.stdout.readline()
    agent.wait_loops_after(time.time())  # its memory seen and judged (kill after 0s) twice
    assert stranger.poll() is None
    stranger.communicate(timeout=30)
    assert stranger.returncode == 0
    assert not [e for e in agent.events() if e.get("event") in ("violation", "action")]
