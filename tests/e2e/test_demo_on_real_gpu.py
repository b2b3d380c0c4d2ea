"""The demo on a real NVIDIA GPU (run by the lead on the GPU host): with gpu_job and with
PyTorch workloads, the three outcomes hold against the real driver, real NVML and eBPF uprobes
on the real libcuda."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from agent_harness import REPO

pytestmark = [pytest.mark.gpu, pytest.mark.bpf, pytest.mark.slow]


@pytest.mark.parametrize("jobs", ["gpu_job", "torch"])
def test_demo_three_outcomes_on_the_gpu(jobs: str) -> None:
    if jobs == "torch":
        pytest.importorskip("torch")
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("GPUWARDEN_DEMO_SIM", None)
    args = ["bash", str(REPO / "examples" / "demo" / "run_demo.sh")]
    if jobs == "torch":
        args.append("--torch")
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    print(out)
    assert done.returncode == 0, out
    assert "on the real GPU" in out
    assert "holding 256 MiB for 5000 ms" in out and "(workload 1 exit status 0)" in out
    assert "out of memory after" in out and "exit status 3" in out
    assert "serving/bypass   alert" in out and "verdict=bypass" in out
    assert "exit status 143 = SIGTERM" in out or "exit status 137 = SIGKILL" in out
    assert "gpuwarden_ebpf_up 1.0" in out and "gpuwarden_nvml_up 1.0" in out
    # nobody but the bypassing workload was acted on
    verdicts = [ln for ln in out.splitlines() if ln.startswith("  serving/")]
    assert verdicts and all(ln.startswith("  serving/bypass") for ln in verdicts), verdicts
