"""Under `default`, gpucores is a weight, as cgroups' cpu.weight is: busy containers whose shares
add up to less than 100 split the whole GPU in proportion to them (lim_share_scaled, and turn
windows that fill the period).  Each was held to its share before, and the rest of the GPU sat
idle while both were busy (30 + 30: 0.29-0.30 each).  Under `force` a share stays a cap, and
a busy container with no gpucores takes what the shares leave (lim_rest_share).
Simulated GPU, 1-ms kernels synchronised every 4, 3-s runs measured from 1 s on."""

from __future__ import annotations

from pathlib import Path

import pytest
from rounds import judged_runs


def busy_together(loop, make_sim_gpu, tmp: Path, *containers: dict[str, str]) -> list[float]:
    """The containers busy together on one simulated GPU for 3 s: their shares (one run,
    taken again while the machine stalls: rounds.judged_runs)."""
    def one(r: int) -> dict[str, float]:
        run, gpu = loop.fresh(str(r)), make_sim_gpu().env
        procs = [run.start(gpu, "kernel", 1000, 3.0, LAUNCH_LOOP_SYNC="4",
                           CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{r}-{i}.region"), **env)
                 for i, env in enumerate(containers)]
        return {str(i): float(run.result(p)["share"]) for i, p in enumerate(procs)}

    got = judged_runs(loop, one, rounds=1)[0]
    return [got[str(i)] for i in range(len(containers))]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("limits", "want"),
    [((30, 30), (0.50, 0.50)), ((20, 50), (0.286, 0.714))],
    ids=["30+30", "20+50"],
)
def test_busy_shares_under_100_split_the_whole_gpu_in_proportion(
        loop, make_sim_gpu, tmp_path: Path, limits: tuple[int, int],
        want: tuple[float, float]) -> None:
    got = busy_together(loop, make_sim_gpu, tmp_path,
                        *({"CUDA_DEVICE_SM_LIMIT": str(limit)} for limit in limits))
    for share, due in zip(got, want, strict=True):
        assert share == pytest.approx(due, abs=0.05), (limits, got)


@pytest.mark.slow
def test_a_cap_stays_a_cap_under_force(loop, make_sim_gpu, tmp_path: Path) -> None:
    force = {"CUDA_DEVICE_SM_LIMIT": "30", "GPU_CORE_UTILIZATION_POLICY": "force"}
    got = busy_together(loop, make_sim_gpu, tmp_path, force, force)
    assert got == pytest.approx([0.30, 0.30], abs=0.03), got


@pytest.mark.slow
@pytest.mark.parametrize(
    ("others", "want"),
    [(1, (0.30, 0.70)), (2, (0.30, 0.35, 0.35))],
    ids=["one", "two"],
)
def test_beside_containers_with_no_gpucores_a_share_is_guaranteed(
        loop, make_sim_gpu, tmp_path: Path, others: int, want: tuple[float, ...]) -> None:
    # a container with no gpucores takes turns by what the shares leave, split evenly with the
    # other such containers (lim_rest_share); before, it was not paced and time-sliced with the
    # 30 one, which got 0.18-0.19 beside one of them and 0.14 beside two
    got = busy_together(loop, make_sim_gpu, tmp_path, {"CUDA_DEVICE_SM_LIMIT": "30"},
                        *({} for _ in range(others)))
    for share, due in zip(got, want, strict=True):
        assert share == pytest.approx(due, abs=0.05), got
