"""A process that sees only the node's second GPU calls it ordinal 0: `gpuwarden run` puts a
workload on the least loaded GPU and sets CUDA_VISIBLE_DEVICES to its UUID (in a pod, the
container runtime's NVIDIA_VISIBLE_DEVICES does the same). The eBPF ledger records ordinal 0; the
agent must charge it to the second GPU, where the shim counted the same bytes. Charging it to the
node's GPU 0 read as a bypass there, and the strict rule killed a well-behaved workload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agent_harness import AgentProc, write_policy
from testbed import wait_for

pytestmark = [pytest.mark.bpf, pytest.mark.slow]

UUIDS = "import json, pynvml; pynvml.nvmlInit(); print(json.dumps([pynvml.nvmlDeviceGetUUID(" \
        "pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]))"


def test_ordinal_0_of_a_process_on_gpu_1_is_charged_to_gpu_1(tmp_path: Path, make_sim_gpu,
                                                              gpu_job: Path) -> None:
    gpu = make_sim_gpu(devices=2, memory="8GiB")
    agent = AgentProc(tmp_path / "state", [write_policy(tmp_path / "policy")], gpu.env).start()
    try:
        second = json.loads(subprocess.run([sys.executable, "-c", UUIDS], env=gpu.env,
                                           capture_output=True, text=True, check=True,
                                           timeout=60).stdout)[1]
        # the first workload takes GPU 0, so the next one goes to GPU 1
        first = agent.run(["--namespace", "watch", "--name", "first"], [gpu_job, "64", "6000"])
        wait_for(lambda: agent.metric("gpuwarden_workloads") == 1, 10,
                 "the agent tracking the first workload (gpuwarden_workloads 1)",
                 detail=lambda: agent.stderr()[-2000:])
        p = agent.run(["--namespace", "strict", "--name", "second"], [gpu_job, "256", "4000"])
        # while it runs (4 s): its eBPF figure, charged to the node's second GPU
        ebpf = wait_for(lambda: agent.metric("gpuwarden_workload_memory_used_bytes",
                                             {"pod": "second", "source": "ebpf",
                                              "gpu_uuid": second}), 3.5,
                        f"the eBPF figure of 'second' on {second} (the node's GPU 1)",
                        interval=0.2, detail=lambda: agent.stderr()[-2000:])
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, (p.returncode, out, err)
        assert ebpf >= 256 << 20, agent.stderr()[-2000:]
        acted = [e for e in agent.events()
                 if e.get("event") == "action" and e["workload"]["pod"] == "second"]
        assert acted == [], acted
        first.communicate(timeout=30)
    finally:
        agent.stop()
