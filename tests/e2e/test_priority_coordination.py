"""Priority coordination through the regions: when a high-priority workload starts using the GPU
that a low-priority one runs on, the agent tells the low one to yield within 100 ms, and lets it
run unlimited again within 100 ms of the high one's exit; with and without eBPF."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_harness import AgentProc

from libvgpu import region as lr

DEV0 = lr.RegionStruct.devices.offset
DEV_SIZE = lr.ctypes.sizeof(lr.DeviceStruct)
COMPUTE = lr.DeviceStruct.compute.offset


def override(region: Path) -> tuple[int, int]:
    """(agent_limit_pct, agent_yield) of device 0."""
    raw = region.read_bytes()[DEV0 + COMPUTE:DEV0 + COMPUTE + lr.ctypes.sizeof(
        lr.ComputeDevice)]
    c = lr.ComputeDevice.from_buffer_copy(raw)
    return int(c.agent_limit_pct), int(c.agent_yield)


def wait_for(region: Path, want: tuple[int, int], timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if override(region) == want:
            return time.monotonic()
        time.sleep(0.001)
    raise AssertionError(f"{region}: override {override(region)}, wanted {want}")


RUN_FREE = (lr.COMPUTE_AGENT_UNLIMITED, lr.COMPUTE_YIELD["run"])
YIELD_30 = (30, lr.COMPUTE_YIELD["yield"])


@pytest.mark.parametrize("mode", [pytest.param("ebpf", marks=pytest.mark.bpf), "no-ebpf"])
def test_low_yields_to_high_within_100ms(start_agent, gpu_job: Path, mode: str) -> None:
    agent: AgentProc = start_agent(*(["--no-ebpf"] if mode == "no-ebpf" else []))
    low = agent.run(["--namespace", "demo", "--name", "low", "--priority", "low",
                     "--gpucores", "30"], [gpu_job, "64", "20000"])
    adm = agent.wait_event(lambda e: e.get("event") == "workload_admitted")
    region = agent.state_dir / "regions" / f"{adm['workload']['id']}.region"
    wait_for(region, RUN_FREE, 10)  # alone: not limited
    env = dict(agent.env, GPU_JOB_TRACE="1")
    high = agent.run(["--namespace", "demo", "--name", "high", "--priority", "high",
                      "--gpucores", "50"], [gpu_job, "64", "1500"], env=env)
    assert high.stdout is not None
    line = high.stdout.readline()
    t_start = int(line.split("=")[1]) / 1e9  # just after its context, before its allocation
    t_yield = wait_for(region, YIELD_30, 5)
    assert t_yield - t_start <= 0.1, f"yield after {1000 * (t_yield - t_start):.0f} ms"
    high.communicate(timeout=30)
    t_exit = time.monotonic()
    t_free = wait_for(region, RUN_FREE, 5)
    assert t_free - t_exit <= 0.1, f"free after {1000 * (t_free - t_exit):.0f} ms"
    low.kill()
    low.wait(10)
