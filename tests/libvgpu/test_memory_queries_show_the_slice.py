"""Memory queries show the container's slice through CUDA (cuMemGetInfo_v2, cuDeviceTotalMem_v2)
and through NVML as pynvml loads it (dlopen + dlsym, like nvidia-smi): total = limit, used = the
container's usage across processes, free = min(limit - used, physical free)."""

from __future__ import annotations

import json
import subprocess
import sys

from cudaprobe import GiB, MiB

PYNVML = r"""
import json, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
m1 = pynvml.nvmlDeviceGetMemoryInfo(h)
m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
print(json.dumps({"v1": [m1.total, m1.used, m1.free], "v2": [m2.total, m2.used, m2.free]}))
"""


def nvml_view(env: dict[str, str]) -> dict[str, list[int]]:
    res = subprocess.run(
        [sys.executable, "-c", PYNVML], env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_cuda_queries_show_the_limit(shim) -> None:
    rows, _ = shim("3000m").run("dlsym", "info", "total", "alloc:1000000000", "info")
    assert rows[0]["total"] == str(3000 * MiB)
    assert rows[0]["free"] == str(3000 * MiB - 300 * MiB)
    assert rows[1]["total"] == str(3000 * MiB)
    assert rows[3]["free"] == str(3000 * MiB - 300 * MiB - 1_000_000_000)


def test_free_is_capped_by_physical_free(make_sim_gpu, cudaprobe, tmp_path) -> None:
    from libvgpu.paths import shim_path

    gpu = make_sim_gpu(memory="2GiB")
    env = {
        **gpu.env,
        "LD_PRELOAD": str(shim_path()),
        "CUDA_DEVICE_MEMORY_LIMIT": "10g",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(tmp_path / "r"),
    }
    res = cudaprobe.run("init", "primary:0", "info", env=env)
    assert res.ok, res
    free = int(res.of("info")[0]["free"])
    assert free == 2 * GiB - 300 * MiB  # physical free, though the limit would allow more


def test_nvml_shows_the_slice_and_the_containers_usage(shim) -> None:
    run = shim("3000m")
    idle = nvml_view(run.env)
    assert idle["v1"] == [3000 * MiB, 0, 3000 * MiB]
    assert idle["v2"] == [3000 * MiB, 0, 3000 * MiB]
    with run.spawn("dlsym", "alloc:1000000000", "wait") as holder:
        assert holder.wait_for()[2]["rc"] == "0"
        busy = nvml_view(run.env)
        used = 1_000_000_000 + 300 * MiB
        assert busy["v1"] == [3000 * MiB, used, 3000 * MiB - used]
        assert busy["v2"] == busy["v1"]
        holder.finish(timeout=30)


def test_nvml_without_limit_is_the_real_device(shim) -> None:
    view = nvml_view(shim(None).env)
    assert view["v1"][0] == 80 * GiB
