from __future__ import annotations
import os
from pathlib import Path
import pytest
from rounds import compute_state

IDLE = [int(x) for x in os.environ.get("IDLES", "3000").split(",")]

@pytest.mark.parametrize("idle_us", IDLE)
def test_gap(loop, make_sim_gpu, tmp_path: Path, idle_us: int) -> None:
    run = loop.fresh("a")
    alone = float(run.run(make_sim_gpu().env, "kernel", 1000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                          LAUNCH_LOOP_SYNC="1", LAUNCH_LOOP_IDLE_US=str(idle_us),
                          CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "alone.region"))["share"])
    env = make_sim_gpu().env
    s = run.start(env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="30", LAUNCH_LOOP_SYNC="1",
                  LAUNCH_LOOP_IDLE_US=str(idle_us), LIBCUDA_LOG_LEVEL="3",
                  CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "s.region"))
    b = run.start(env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="70",
                  CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "b.region"))
    rs, rb = run.result(s), run.result(b)
    print(f"\nidle {idle_us}: alone {alone:.3f} service {float(rs['share']):.3f} busy {float(rb['share']):.3f}")
    print(str(rs["stderr"])[-800:])
