"""Over the compute share for longer than allowed: a workload that escapes libvgpu's compute
limiter and keeps the (simulated) GPU busy while sharing it gets a "compute" verdict from NVML's
per-process utilization, only after the rule's compute grace; a workload alone on the GPU is not
core-limited and gets none."""

from __future__ import annotations

import time
from pathlib import Path

from agent_harness import TEST_POLICY, AgentProc, write_policy
from cudaprobe import CudaProbe

POLICY = TEST_POLICY + """
rule "watch-compute" {
  match namespace == "watchc"
  mode = audit
  compute_grace = 2s
}
"""


def busy(agent: AgentProc, cudaprobe: CudaProbe, name: str, seconds: int) -> object:
    # no shim (env -u LD_PRELOAD): nothing paces its kernels
    load = cudaprobe.argv("init", "primary:0", f"duty:50:0:{seconds * 1000}")
    return agent.run(["--namespace", "watchc", "--name", name, "--gpucores", "30"],
                     ["env", "-u", "LD_PRELOAD", *load])


def compute_verdicts(agent: AgentProc) -> list[dict]:
    return [e for e in agent.events() if e.get("verdict") == "compute"]


def test_compute_verdict_only_when_sharing_and_after_grace(start_agent, gpu_job: Path,
                                                           cudaprobe: CudaProbe,
                                                           tmp_path: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf",
                                   policy=[write_policy(tmp_path / "pol", POLICY)])
    alone = busy(agent, cudaprobe, "alone", 5)
    alone.communicate(timeout=60)
    assert not compute_verdicts(agent)
    neighbour = agent.run(["--namespace", "watchc", "--name", "neighbour", "--gpucores", "30"],
                          [gpu_job, "16", "12000"])
    assert neighbour.stdout is not None and "holding" in neighbour.stdout.readline()
    agent.wait_loops_after(time.time())  # the GPU is shared as far as the agent knows
    t0 = time.time()
    hog = busy(agent, cudaprobe, "hog", 8)
    ev = agent.wait_event(lambda e: e.get("verdict") == "compute", timeout=30)
    assert ev["workload"]["pod"] == "hog" and ev["action"] == "alert"
    assert ev["evidence"]["sm_ratio"] > 0.35 and ev["limit"] == 0.3
    assert ev["ts"] - t0 >= 2.0  # not before the compute grace
    hog.communicate(timeout=60)
    neighbour.communicate(timeout=60)
    assert {e["workload"]["pod"] for e in compute_verdicts(agent)} == {"hog"}
