"""The launch gate's CPU cost (docs/compute.md, "Hot path"), on the simulated GPU with a real
driver's call costs (GPUWARDEN_SIM_CALL_NS): a launch-bound loop of tiny kernels under a limit it
never reaches pays little per launch for being governed.  On the H200 a measurement's two
cuEventRecord cost ~1.1 us each; a gate that measured one launch in 8 and queried events on
every launch slowed an 8-layer encoder at batch 1 to 70 % of its alone speed under a 50 % limit
it did not reach (nothing waited).  The costs are scaled up 10x here so that what is counted is
the gate's driver calls per launch, not this machine's speed."""

from __future__ import annotations

import pytest

# launch 2.9 us, cuEventRecord 11 us, cuEventQuery / cuStreamQuery 1.5 us
CALL_NS = "2900,11000,1500"


def call_ns(loop, sim_env, **extra: str) -> float:
    out = loop.run(sim_env, "kernel", 5, 2.0, GPUWARDEN_SIM_CALL_NS=CALL_NS, LAUNCH_LOOP_CPU="1",
                   LAUNCH_LOOP_GAP_US="10", LAUNCH_LOOP_SYNC="4", **extra)
    return float(out["call_ns"])


@pytest.mark.slow
def test_gate_adds_few_driver_calls_to_a_launch_bound_loop(loop, make_sim_gpu, tmp_path) -> None:
    plain, gated = [], []
    for i in range(3):  # alternated, the best of each: a loaded machine inflates CPU times
        plain.append(call_ns(loop, make_sim_gpu().env))
        gated.append(call_ns(loop, make_sim_gpu().env, CUDA_DEVICE_SM_LIMIT="90",
                             GPU_CORE_UTILIZATION_POLICY="force",
                             CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"c{i}.region")))
    # this gate: 1.0-1.5 us over a plain call of 4.1-4.9 us (a measurement's two records in 32
    # launches and its queries; 0.27-0.35 of the plain call); the gate that measured one launch
    # in 8 and queried on every launch: ~3.9 us.  The bound is relative to the plain call, the
    # same loop's own cost in the same run: a loaded CI machine slowed every call (plain 5.6 us,
    # the gate 2.1: 0.37), and a fixed 1800-ns bound failed there.  0.4 is that 1800 ns at a
    # plain call of 4.5 us, no looser.  At 90 % the loop never waits, its charges included: they run
    # about twice its kernels (the records' CPU time, scaled up here), and at a 50 % limit the
    # pacer bound until the busy feedback brought them down; a launch that waited cost less CPU
    # (1.3-1.4 us against 1.6-1.9 once it did not)
    assert min(gated) - min(plain) < 0.4 * min(plain), (plain, gated)


def _gated_call_ns(loop, gpu, tmp_path, name: str, **extra: str) -> float:
    return call_ns(loop, gpu.env, CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{name}.region"),
                   **extra)


@pytest.mark.slow
def test_a_container_alone_under_default_and_a_high_beside_a_low_measure_little(
        loop, make_sim_gpu, tmp_path) -> None:
    """Two gate paths that pace nothing: a container with gpucores alone under `default` (only
    its queue is bounded, at 100 ms: `hold`) and a high-priority one beside a low (it keeps its
    busy horizon for the low).  Neither may measure more than the paced path does: the grain of
    the bound they keep, not every launch (two records each)."""
    plain, alone, high = [], [], []
    for i in range(3):  # alternated, the best of each, as above
        plain.append(call_ns(loop, make_sim_gpu().env))
        alone.append(_gated_call_ns(loop, make_sim_gpu(), tmp_path, f"alone{i}",
                                    CUDA_DEVICE_SM_LIMIT="30"))
        gpu = make_sim_gpu()
        low = loop.start(gpu.env, "kernel", 1000, 3.0, CUDA_DEVICE_SM_LIMIT="30",
                         CUDA_TASK_PRIORITY="1",
                         CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"low{i}.region"))
        high.append(_gated_call_ns(loop, gpu, tmp_path, f"high{i}", CUDA_TASK_PRIORITY="0"))
        loop.result(low)
    assert min(alone) - min(plain) < 0.4 * min(plain), (plain, alone)
    assert min(high) - min(plain) < 0.4 * min(plain), (plain, high)
