"""A malformed compute variable is reported once, naming the variable, the value and what is
valid, and the shim takes the safe side (docs/compute.md): never "no limit"."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_malformed_sm_limit_holds_to_one_percent(loop, sim_gpu) -> None:
    r = loop.run(sim_gpu.env, "kernel", 1000, 2.5, CUDA_DEVICE_SM_LIMIT="thirty",
                 GPU_CORE_UTILIZATION_POLICY="force")
    assert "CUDA_DEVICE_SM_LIMIT='thirty' is not a percentage (valid: 0..100" in r["stderr"]
    assert r["stderr"].count("CUDA_DEVICE_SM_LIMIT='thirty'") == 1
    assert r["share"] <= 0.03


@pytest.mark.slow
def test_malformed_per_device_limit_falls_back_to_the_general_one(loop, sim_gpu) -> None:
    r = loop.run(sim_gpu.env, "kernel", 1000, 2.5, CUDA_DEVICE_SM_LIMIT="40",
                 CUDA_DEVICE_SM_LIMIT_0="150", GPU_CORE_UTILIZATION_POLICY="force")
    assert "CUDA_DEVICE_SM_LIMIT_0='150' is not a percentage" in r["stderr"]
    assert "using CUDA_DEVICE_SM_LIMIT" in r["stderr"]
    assert r["share"] == pytest.approx(0.40, abs=0.05)


@pytest.mark.slow
def test_malformed_policy_means_force(loop, sim_gpu) -> None:
    # alone under "default" this workload would not be held; the safe side holds it
    r = loop.run(sim_gpu.env, "kernel", 1000, 2.5, CUDA_DEVICE_SM_LIMIT="30",
                 GPU_CORE_UTILIZATION_POLICY="sometimes")
    assert "GPU_CORE_UTILIZATION_POLICY='sometimes' is not a core policy (valid: default, " \
           "force, disable); using force" in r["stderr"]
    assert r["share"] == pytest.approx(0.30, abs=0.05)


@pytest.mark.slow
def test_malformed_gate_wait_means_auto_and_the_limit_holds(loop, sim_gpu) -> None:
    r = loop.run(sim_gpu.env, "kernel", 1000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                 GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT="spin")
    assert "GPUWARDEN_GATE_WAIT='spin' is not a way to wait (valid: sleep, yield, auto); using " \
        "auto" in r["stderr"]
    assert r["share"] == pytest.approx(0.30, abs=0.05)


def test_malformed_priority_means_low(loop, sim_gpu) -> None:
    r = loop.run(sim_gpu.env, "kernel", 1000, 1.2, CUDA_TASK_PRIORITY="high")
    assert "CUDA_TASK_PRIORITY='high' is not a priority (valid: 0 high, 1 low); using 1 (low)" \
        in r["stderr"]


@pytest.mark.slow
def test_unusable_node_region_holds_low_priority_to_its_limit(loop, sim_gpu, tmp_path) -> None:
    bad = tmp_path / "not-a-region"
    bad.write_bytes(b"x" * 100_000)
    r = loop.run(sim_gpu.env, "kernel", 1000, 2.5, CUDA_DEVICE_SM_LIMIT="30",
                 GPUWARDEN_NODE_REGION=str(bad))
    assert f"GPUWARDEN_NODE_REGION={bad}: not a gpuwarden node region" in r["stderr"]
    assert "low-priority work is held to its gpucores" in r["stderr"]
    assert r["share"] == pytest.approx(0.30, abs=0.05)
