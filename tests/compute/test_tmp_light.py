import pytest
from pathlib import Path

@pytest.mark.parametrize("idle_us", ["9000", "3000"])
def test_light(loop, sim_gpu, tmp_path: Path, idle_us):
    gpu_env = sim_gpu.env
    a = loop.start(gpu_env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="30",
                   LAUNCH_LOOP_SYNC="1", LAUNCH_LOOP_IDLE_US=idle_us,
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "a.region"))
    b = loop.start(gpu_env, "kernel", 1000, 4.0, CUDA_DEVICE_SM_LIMIT="70",
                   CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "b.region"))
    ra, rb = loop.result(a), loop.result(b)
    print("\nA", {k:v for k,v in ra.items() if k!="stderr"}, "\nB", {k:v for k,v in rb.items() if k!="stderr"})
