"""On a real GPU (marker `gpu`): one thread captures CUDA graphs in PyTorch's default, global
capture mode while another thread of the same process launches paced work on its own stream.
The gate's cuEventQuery would be forbidden by the global capture and invalidate it; the gate runs
its driver calls in the relaxed mode instead (libvgpu/src/measure.c), so every capture succeeds.

    make -C libvgpu && python -m pytest -m gpu tests/compute -v
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from libvgpu.paths import shim_path
from libvgpu.region import Region

pytestmark = pytest.mark.gpu

PROBE = r"""
import json, threading, time, torch
n = 2048
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
c = torch.empty_like(a)
x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
paced, capture = torch.cuda.Stream(), torch.cuda.Stream()
for s in (paced, capture):  # cuBLAS handles and workspaces exist before any capture
    with torch.cuda.stream(s):
        for _ in range(20):
            torch.matmul(a, a, out=c)
            torch.matmul(x, x, out=y)
torch.cuda.synchronize()
stop = threading.Event()
launched = [0]

def loop():
    with torch.cuda.stream(paced):
        while not stop.is_set():
            torch.matmul(a, a, out=c)
            launched[0] += 1

t = threading.Thread(target=loop)
t.start()
deadline = time.monotonic() + 30
while launched[0] < 20:  # the captures start while the paced thread launches (and is paced)
    if time.monotonic() > deadline:
        stop.set()
        raise SystemExit(f"the paced thread launched {launched[0]} kernels in 30 s, not 20")
    time.sleep(0.01)
errors, ok = [], 0
for _ in range(30):
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g, stream=capture):
            for _ in range(5):
                torch.matmul(x, x, out=y)
        g.replay()
        ok += 1
    except RuntimeError as e:
        errors.append(str(e).splitlines()[0])
stop.set()
t.join()
torch.cuda.synchronize()
print(json.dumps({"ok": ok, "errors": errors[:3], "n_errors": len(errors),
                  "paced_launches": launched[0]}))
"""


def test_graph_capture_succeeds_beside_a_paced_thread(tmp_path: Path) -> None:
    region = tmp_path / "c.region"
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=str(os.environ.get("GPUWARDEN_SHIM") or shim_path()),
        CUDA_DEVICE_MEMORY_SHARED_CACHE=str(region),
        GPUWARDEN_NODE_REGION=str(tmp_path / "node.region"),
        CUDA_DEVICE_SM_LIMIT="30",
        GPU_CORE_UTILIZATION_POLICY="force",
    )
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    with Region.open(region) as r:
        state = r.compute_state(0)
    assert state.effective_pct == 30 and state.launches > 0, state  # the gate was taken
    assert out["paced_launches"] > 0, out
    assert out["n_errors"] == 0 and out["ok"] == 30, out
