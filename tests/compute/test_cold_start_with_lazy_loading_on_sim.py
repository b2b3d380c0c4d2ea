"""A model-shaped workload paced from its first launch, with CUDA's lazy module loading: each
kernel's first launch spends milliseconds loading its module inside the launch call, so the GPU
sits idle behind that launch's start event.  Such a sample is not the kernel's time; taken as
one, it charged a batch-1 encoder on the H200 ~290 us a launch instead of ~7 and held it to 5 %
of its speed under a 30 % limit it never came near (issue 18): the kernels whose first sample
held the loading were never measured again (tests/compute/
test_sampling_reaches_every_kernel_of_a_cycle.py).  Here the simulated driver loads each function
on its first launch; the test holds the end-to-end behaviour (on the simulated GPU the stride's
aliasing did not keep a bad sample: the loop's dear first samples are followed by measured
launches, so it passed before the fix too).  The second test holds the first second: a first
sample that holds the loading is not a cost sample (libvgpu/src/measure.c, loaded_in_the_call)."""

from __future__ import annotations

import pytest
from rounds import each_run, judged_runs, medians

KERNELS = "16"  # one forward pass: 16 different kernels, then a synchronisation
LAZY_US = "3000"


def _run(loop, sim_gpu, tmp_path, name: str, **limits: str) -> dict[str, float | str]:
    return loop.run(sim_gpu.env, "kernel", 20, 3.0, LAUNCH_LOOP_KERNELS=KERNELS,
                    LAUNCH_LOOP_SYNC=KERNELS, LAUNCH_LOOP_GAP_US="80",
                    GPUWARDEN_SIM_LAZY_LOAD_US=LAZY_US,
                    CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / f"{name}.region"), **limits)


def _alone_and_held(loop, sim_gpu, tmp_path, n: int = 0) -> tuple[dict[str, float | str], ...]:
    """The model alone, then paced at 30 % (`force`) from its first launch, each a container of
    its own (`n` tells pairs apart: a container's region keeps what it learnt)."""
    return (_run(loop, sim_gpu, tmp_path, f"alone{n}"),
            _run(loop, sim_gpu, tmp_path, f"held{n}", CUDA_DEVICE_SM_LIMIT="30",
                 GPU_CORE_UTILIZATION_POLICY="force"))


@pytest.mark.slow
def test_a_launch_bound_model_under_a_limit_it_never_reaches_keeps_its_speed_from_the_start(
        loop, sim_gpu, tmp_path) -> None:
    # three alternated pairs, judged by the medians of their rates (rounds.py): a launch-bound
    # loop's speed is the host's, and one pair on a 2-core machine with two CPU-burning loops
    # read 0.86 (7603 launches/s against 8848)
    def one(n: int) -> dict[str, float]:
        alone, held = _alone_and_held(loop, sim_gpu, tmp_path, n)
        assert float(alone["share"]) < 0.25, alone  # alone it stays well below the limit
        return {"alone": float(alone["rate"]), "held": float(held["rate"])}

    runs = judged_runs(loop, one)
    m = medians(runs)
    # from its second second on (launch_loop's window), within 10 % of its speed alone
    assert m["held"] >= 0.9 * m["alone"], each_run(runs)


@pytest.mark.slow
def test_module_loading_is_not_charged_as_gpu_time_in_the_first_second(
        loop, sim_gpu, tmp_path) -> None:
    # each kernel's first launch loads its module inside the call (3-12 ms here) while the GPU
    # waits behind the start event: charged as the kernel's cost (its provisional charge settled
    # at it, the next launches charged it), the model ran its first second at half its speed
    # under a 30 % limit it never comes near
    # two alternated pairs, the best first second of each: a first second is one process's
    # start, and on a loaded 2-core machine one such comparison read 0.85 (0.120 against 0.141)
    pairs = [_alone_and_held(loop, sim_gpu, tmp_path, n) for n in range(2)]
    alone = max((a for a, _ in pairs), key=lambda r: float(r["first_share"]))
    held = max((h for _, h in pairs), key=lambda r: float(r["first_share"]))
    assert float(alone["first_share"]) < 0.25, alone
    # launch_loop's first second: the GPU time of the kernels launched in it over its wall time
    assert float(held["first_share"]) >= 0.9 * float(alone["first_share"]), (alone, held)
