"""On a real NVIDIA GPU (marker `gpu`; the lead runs these on the H200): PyTorch under a 3000 MiB
slice, with and without expandable segments (the VMM path), fails with its ordinary
torch.OutOfMemoryError having used nearly all of the slice; nvidia-smi and pynvml show 3000 MiB
total; two processes sharing one 3000 MiB region cannot hold 2000 MiB each.

    make -C libvgpu && python -m pytest -m gpu tests/libvgpu -v
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from libvgpu.paths import shim_path
from libvgpu.region import Region

pytestmark = pytest.mark.gpu
MiB = 2**20
LIMIT = 3000 * MiB

FILL = r"""
import json, sys, torch
chunk = int(sys.argv[1])
held, err = [], None
torch.cuda.init()
try:
    while True:
        held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
except Exception as e:  # the type is what the test checks
    err = type(e).__name__ + ": " + str(e).splitlines()[0]
free, total = torch.cuda.mem_get_info()
print(json.dumps({"held": len(held) * chunk, "error": err, "free": free, "total": total,
                  "reserved": torch.cuda.memory_reserved()}))
"""

HOLD = r"""
import sys, torch
try:
    x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device="cuda")
    print("ok", flush=True)
except torch.OutOfMemoryError:
    print("oom", flush=True)
except torch.AcceleratorError as e:
    # The loser's context (about 500 MiB on the H200) may itself not fit in what is left: the
    # shim then refuses the context with CUDA_ERROR_OUT_OF_MEMORY, which torch reports this way.
    print("oom-context" if "out of memory" in str(e) else f"error {e}", flush=True)
sys.stdin.read()
"""


def shim_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.update(
        LD_PRELOAD=str(shim_path()),
        CUDA_DEVICE_MEMORY_LIMIT="3000m",
        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp_path / "region"),
        **extra,
    )
    return env


@pytest.mark.parametrize("expandable", [False, True], ids=["caching", "expandable_segments"])
def test_pytorch_fills_the_slice_then_gets_a_normal_oom(tmp_path: Path, expandable: bool) -> None:
    pytest.importorskip("torch", reason="PyTorch is needed for this GPU test")
    extra = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} if expandable else {}
    env = shim_env(tmp_path, **extra)
    chunk = 64 * MiB
    res = subprocess.run(
        [sys.executable, "-c", FILL, str(chunk)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["error"] is not None and out["error"].startswith("OutOfMemoryError"), out
    assert out["total"] == LIMIT
    with Region.open(tmp_path / "region") as region:
        dev = region.snapshot().devices[0]
    assert dev.limit_bytes == LIMIT
    assert dev.used_bytes <= LIMIT
    # nearly all of the slice was used (context + PyTorch's segments): less than two chunks
    # (+ PyTorch's rounding) were left between the peak and the limit
    assert dev.peak_bytes >= LIMIT - 2 * chunk - 20 * MiB, (dev, out)
    assert out["held"] >= out["reserved"] - 2 * chunk, out


def test_nvidia_smi_and_pynvml_show_the_slice(tmp_path: Path) -> None:
    env = shim_env(tmp_path)
    smi = shutil.which("nvidia-smi")
    assert smi is not None, "nvidia-smi is not on PATH"
    res = subprocess.run(
        [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3000"
    code = (
        "import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); "
        "print(pynvml.nvmlDeviceGetMemoryInfo(h).total)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == LIMIT


def test_two_processes_cannot_hold_2000_mib_each(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="PyTorch is needed for this GPU test")
    env = shim_env(tmp_path)
    procs = []
    try:
        for _ in range(2):
            p = subprocess.Popen(
                [sys.executable, "-c", HOLD, str(2000 * MiB)],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.append(p)
            line = p.stdout.readline().strip()
            assert line in ("ok", "oom", "oom-context"), line + p.stderr.read()
            procs[-1].answer = line
        first, second = (p.answer for p in procs)
        assert first == "ok"
        assert second in ("oom", "oom-context")
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=60)


CONTEXT = r"""
import torch
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print("ok", flush=True)
"""


def test_context_is_counted_inside_a_pid_namespace(tmp_path: Path) -> None:
    """A pod's processes live in their own PID namespace, where NVML's host pids never equal
    getpid(): the shim still finds its process (the one that appeared on the GPU while it made
    its context) and counts the context, as it does outside."""
    pytest.importorskip("torch", reason="PyTorch is needed for this GPU test")
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is needed for this GPU test"
    counted = {}
    for where, prefix in (("host", []), ("namespace", [unshare, "--pid", "--fork",
                                                       "--mount-proc"])):
        region = tmp_path / f"{where}.region"
        res = subprocess.run(
            [*prefix, sys.executable, "-c", CONTEXT],
            env={**shim_env(tmp_path), "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(region)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]
        with Region.open(region) as r:
            counted[where] = r.snapshot().devices[0].peak_bytes
    # the context (about 500 MiB on the H200) counted in both, within 64 MiB of each other
    assert counted["host"] > 200 * MiB, counted
    assert abs(counted["namespace"] - counted["host"]) < 64 * MiB, counted
