"""The standalone agent's admission places through the shared placement core: on two 80 GiB
simulated GPUs, four 60 GiB workloads are not all admitted (they were, when the agent placed
by "fewest workloads"); the two that fit land on different GPUs, the others are refused with
the GPUs' free memory named."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from agent_harness import AgentProc, write_policy


def test_four_60gib_workloads_on_two_80gib_gpus_admit_two(
        tmp_path: Path, make_sim_gpu: Callable[..., object]) -> None:
    sim = make_sim_gpu(devices=2, memory="80GiB")
    agent = AgentProc(tmp_path / "state", [write_policy(tmp_path / "policy")],
                      sim.env, ["--no-ebpf"])
    agent.start()
    runs: list[subprocess.Popen[str]] = []
    try:
        for i in range(2):
            runs.append(agent.run(["--namespace", "demo", "--name", f"big{i}", "--gpumem",
                                   "60GiB"], ["sleep", "60"]))
            agent.wait_event(lambda e, i=i: e.get("event") == "workload_admitted"
                             and e["workload"]["pod"] == f"big{i}")
        admitted = [e for e in agent.events() if e.get("event") == "workload_admitted"]
        assert len({next(iter(e["limits_bytes"])) for e in admitted}) == 2  # one per GPU
        for i in (2, 3):
            done = agent.run(["--namespace", "demo", "--name", f"big{i}", "--gpumem", "60GiB"],
                             ["true"])
            _, err = done.communicate(timeout=60)
            assert done.returncode == 1, err
            assert "no GPU of this machine has room" in err
            assert "GPU0-1 20480MiB free, needs 61440MiB (40960 short)" in err
        small = agent.run(["--namespace", "demo", "--name", "small", "--gpumem", "20GiB"],
                          ["sleep", "60"])
        runs.append(small)
        agent.wait_event(lambda e: e.get("event") == "workload_admitted"
                         and e["workload"]["pod"] == "small")
    finally:
        for r in runs:
            r.kill()
            r.wait(10)
        agent.stop()
