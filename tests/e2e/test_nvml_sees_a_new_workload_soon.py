"""A new workload's NVML figure is there within a fraction of a second of the shim's, not after
the next regular NVML sample (up to 2 s with eBPF on): the agent samples NVML again when a new
workload holds memory that NVML's last sample could not show."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_harness import AgentProc

pytestmark = [pytest.mark.bpf]


def test_nvml_memory_follows_the_shim_within_half_a_second(start_agent, gpu_job: Path) -> None:
    agent: AgentProc = start_agent()  # eBPF on: NVML's regular period is 2 s
    lags = []
    for i in range(3):
        w = agent.run(["--namespace", "demo", "--name", f"w{i}", "--gpumem", "1GiB"],
                      [gpu_job, "128", "6000"])
        labels = {"pod": f"w{i}"}
        deadline = time.monotonic() + 30
        while not agent.metric("gpuwarden_workload_memory_used_bytes",
                               {**labels, "source": "shim"}):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        t0 = time.monotonic()
        while not agent.metric("gpuwarden_workload_memory_used_bytes",
                               {**labels, "source": "nvml"}):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        lags.append(time.monotonic() - t0)
        w.kill()
        w.communicate(timeout=30)
    assert max(lags) < 0.7, lags
