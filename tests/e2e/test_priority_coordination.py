"""Priority coordination through the regions, for shims that see no node region
(GPUWARDEN_NODE_REGION=off: they cannot coordinate among themselves): when a high-priority
workload starts using the GPU that a low-priority one runs on, the agent tells the low one to
yield within 100 ms, and lets it run unlimited again within 100 ms of the high one's exit; with
and without eBPF.  Shims that see the node region coordinate themselves, finer than the agent's
yield (which stops the low one while the high one merely holds memory): the agent writes
nothing for them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_harness import AgentProc
from cudaprobe import CudaProbe

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
NO_OVERRIDE = (0, lr.COMPUTE_YIELD["auto"])
YIELD_30 = (30, lr.COMPUTE_YIELD["yield"])


def launching(cudaprobe: CudaProbe, total_ms: int) -> list[str]:
    """A workload that holds 64 MiB and keeps launching (its shim's compute side runs and
    publishes whether it sees the node region); its `launch` row marks its first launch."""
    return cudaprobe.argv("init", "primary:0", f"alloc:{64 * 2**20}", "launch:1:10",
                          f"duty:5:5:{total_ms}")


@pytest.mark.parametrize("mode", [pytest.param("ebpf", marks=pytest.mark.bpf), "no-ebpf"])
def test_low_yields_to_high_within_100ms(start_agent, cudaprobe: CudaProbe, mode: str) -> None:
    agent: AgentProc = start_agent(*(["--no-ebpf"] if mode == "no-ebpf" else []))
    alone = dict(agent.env, GPUWARDEN_NODE_REGION="off")
    low = agent.run(["--namespace", "demo", "--name", "low", "--priority", "low",
                     "--gpucores", "30"], launching(cudaprobe, 30000), env=alone)
    adm = agent.wait_event(lambda e: e.get("event") == "workload_admitted")
    region = agent.state_dir / "regions" / f"{adm['workload']['id']}.region"
    wait_for(region, RUN_FREE, 10)  # alone: not limited
    high = agent.run(["--namespace", "demo", "--name", "high", "--priority", "high",
                      "--gpucores", "50"], launching(cudaprobe, 1500), env=alone)
    assert high.stdout is not None
    while not (line := high.stdout.readline()).startswith("launch"):
        assert line, "the high one exited before its first launch"
    t_start = time.monotonic()  # its first launch returned: its shim's first tick is due
    t_yield = wait_for(region, YIELD_30, 5)
    assert t_yield - t_start <= 0.1, f"yield after {1000 * (t_yield - t_start):.0f} ms"
    high.communicate(timeout=30)
    t_exit = time.monotonic()
    t_free = wait_for(region, RUN_FREE, 5)
    assert t_free - t_exit <= 0.1, f"free after {1000 * (t_free - t_exit):.0f} ms"
    low.kill()
    low.wait(10)


def test_shims_that_see_the_node_region_get_no_override(start_agent, cudaprobe: CudaProbe,
                                                        tmp_path: Path) -> None:
    agent: AgentProc = start_agent("--no-ebpf")
    shared = dict(agent.env, GPUWARDEN_NODE_REGION=str(tmp_path / "node.region"))
    low = agent.run(["--namespace", "demo", "--name", "low", "--priority", "low",
                     "--gpucores", "30"], launching(cudaprobe, 30000), env=shared)
    adm = agent.wait_event(lambda e: e.get("event") == "workload_admitted")
    region = agent.state_dir / "regions" / f"{adm['workload']['id']}.region"
    high = agent.run(["--namespace", "demo", "--name", "high", "--priority", "high",
                      "--gpucores", "50"], launching(cudaprobe, 1500), env=shared)
    assert high.stdout is not None
    while not (line := high.stdout.readline()).startswith("launch"):
        assert line, "the high one exited before its first launch"
    agent.wait_loops_after(time.time())  # both launch on the GPU: seen and judged
    assert override(region) == NO_OVERRIDE
    high.communicate(timeout=30)
    agent.wait_loops_after(time.time())
    assert override(region) == NO_OVERRIDE
    low.kill()
    low.wait(10)


def busy_share(proc, ms: int, kernel_ms: int) -> float:
    """The GPU share a `duty:KERNEL_MS:0:MS` workload got: its kernels' time over its run."""
    out, err = proc.communicate(timeout=60)
    rows = [line for line in out.splitlines() if line.startswith("duty")]
    assert rows, (out, err)
    kernels = int(rows[0].split("kernels=")[1].split()[0])
    return kernels * kernel_ms / ms


@pytest.mark.parametrize(("priorities", "want"), [
    # a high one flat out runs as if alone; the low one gets what it leaves (nothing)
    (("high", "low"), lambda a, b: a >= 0.85 and b <= 0.1),
    # two lows at 30 + 30: shares are weights, half the GPU each
    (("low", "low"), lambda a, b: a >= 0.4 and b >= 0.4),
], ids=["high beside low", "two lows at 30"])
def test_under_the_agent_shims_keep_their_semantics(start_agent, cudaprobe: CudaProbe,
                                                    tmp_path: Path, priorities, want) -> None:
    # under the agent's old plan the high one was capped at its 30 and the low one told to
    # yield for as long as the high one held memory; two lows were capped at 30 each
    agent: AgentProc = start_agent("--no-ebpf")
    shared = dict(agent.env, GPUWARDEN_NODE_REGION=str(tmp_path / "node.region"))
    ms, kernel_ms = 4000, 2
    script = cudaprobe.argv("init", "primary:0", f"alloc:{64 * 2**20}", f"duty:{kernel_ms}:0:{ms}")
    procs = [agent.run(["--namespace", "demo", "--name", f"w{i}", "--priority", prio,
                        "--gpucores", "30"], script, env=shared)
             for i, prio in enumerate(priorities)]
    a, b = (busy_share(p, ms, kernel_ms) for p in procs)
    assert want(a, b), (priorities, a, b)
