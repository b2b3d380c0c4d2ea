"""Over the compute share for longer than allowed: a workload that escapes libvgpu's compute
limiter and keeps the (simulated) GPU busy while sharing it gets a "compute" verdict from NVML's
per-process utilization, only after the rule's compute grace; a workload alone on the GPU is not
core-limited and gets none."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_harness import TEST_POLICY, AgentProc, write_policy
from cprog import compile_c

REPO = Path(__file__).resolve().parents[2]
POLICY = TEST_POLICY + """
rule "watch-compute" {
  match namespace == "watchc"
  mode = audit
  compute_grace = 2s
}
"""


@pytest.fixture(scope="module")
def cudactl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c(REPO / "tests" / "sim" / "progs" / "cudactl.c",
                     tmp_path_factory.mktemp("cudactl"))


def busy(agent: AgentProc, cudactl: Path, name: str, seconds: int) -> object:
    # no shim (env -u LD_PRELOAD): nothing paces its kernels
    return agent.run(["--namespace", "watchc", "--name", name, "--gpucores", "30"],
                     ["env", "-u", "LD_PRELOAD", cudactl, "ctx", "0", "duty", "50", "0",
                      str(seconds * 1000)])


def compute_verdicts(agent: AgentProc) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in agent.events() if e.get("verdict") == "compute"]


def test_compute_verdict_only_when_sharing_and_after_grace(start_agent, gpu_job: Path,  # type: ignore[no-untyped-def]
                                                           cudactl: Path, tmp_path: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf",
                                   policy=[write_policy(tmp_path / "pol", POLICY)])
    alone = busy(agent, cudactl, "alone", 5)
    alone.communicate(timeout=60)  # type: ignore[attr-defined]
    assert not compute_verdicts(agent)
    neighbour = agent.run(["--namespace", "watchc", "--name", "neighbour", "--gpucores", "30"],
                          [gpu_job, "16", "12000"])
    assert neighbour.stdout is not None and "holding" in neighbour.stdout.readline()
    agent.wait_loops_after(time.time())  # the GPU is shared as far as the agent knows
    t0 = time.time()
    hog = busy(agent, cudactl, "hog", 8)
    ev = agent.wait_event(lambda e: e.get("verdict") == "compute", timeout=30)
    assert ev["workload"]["pod"] == "hog" and ev["action"] == "alert"
    assert ev["evidence"]["sm_ratio"] > 0.35 and ev["limit"] == 0.3
    assert ev["ts"] - t0 >= 2.0  # not before the compute grace
    hog.communicate(timeout=60)  # type: ignore[attr-defined]
    neighbour.communicate(timeout=60)
    assert {e["workload"]["pod"] for e in compute_verdicts(agent)} == {"hog"}
