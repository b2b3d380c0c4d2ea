"""On a real GPU: the audit attached to the real libcuda (found through the loader) sees what
PyTorch asked the driver for: the ledger equals torch.cuda.memory_reserved(), with the plain
caching allocator (cuMemAlloc_v2) and with expandable segments (cuMemCreate).  NVML's
per-process figure is larger by the context (and driver-internal allocations, e.g. modules);
the difference is printed for docs/bpf.md.

Run on the GPU host as root with torch and BCC importable:
    python -m pytest -s -m gpu tests/bpf/test_gpu_pytorch_ledger.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from testbed import wait_for

pytestmark = [pytest.mark.gpu, pytest.mark.bpf]

TORCH_PROGRAM = r"""
import json, sys, torch
torch.cuda.init()
xs = [torch.ones(n, dtype=torch.uint8, device="cuda") for n in (64 << 20, 100 << 20, 3 << 20)]
del xs[1]  # freed into the cache: still reserved
ys = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(json.dumps({"reserved": torch.cuda.memory_reserved(),
                  "allocated": torch.cuda.memory_allocated()}), flush=True)
sys.stdin.readline()
"""


def _nvml_used(pid: int) -> int | None:
    import pynvml

    pynvml.nvmlInit()
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if p.pid == pid:
                    return int(p.usedGpuMemory or 0)
    finally:
        pynvml.nvmlShutdown()
    return None


@pytest.mark.parametrize("alloc_conf", ["", "expandable_segments:True"])
def test_ledger_matches_pytorch_reserved(alloc_conf: str) -> None:
    from bpf.audit import AuditProbe

    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if alloc_conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
    with AuditProbe() as probe:  # libcuda found through ldconfig / LD_LIBRARY_PATH
        assert probe.attached(), "no libcuda.so.1 found through the loader"
        proc = subprocess.Popen(
            [sys.executable, "-c", TORCH_PROGRAM], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            torch_view = json.loads(proc.stdout.readline())
            ledger = probe.snapshot().get(proc.pid, {})
            try:  # NVML's per-process list lags a little
                nvml = wait_for(lambda: _nvml_used(proc.pid), 5,
                                "NVML listing the process with its memory", interval=0.1)
            except TimeoutError:  # never listed (another PID namespace): the report says None
                nvml = _nvml_used(proc.pid)
            events = [e for e in probe.poll_events() if e.pid == proc.pid]
        finally:
            proc.communicate("go\n", timeout=60)
        kinds = sorted({e.kind for e in events})
        report = {
            "alloc_conf": alloc_conf or "default",
            "torch_reserved": torch_view["reserved"],
            "torch_allocated": torch_view["allocated"],
            "ledger_by_device": ledger,
            "nvml_process_used": nvml,
            "nvml_minus_ledger": None if nvml is None else nvml - sum(ledger.values()),
            "event_kinds": kinds,
            "attached": [str(a.path) for a in probe.attached()],
            "errors": {k: v for k, v in probe.errors().items() if v},
        }
        print("GPU-AUDIT-REPORT " + json.dumps(report), flush=True)
        assert sum(ledger.values()) == torch_view["reserved"], report
        if alloc_conf:
            assert "vmm_create" in kinds, report
        else:
            assert "mem_alloc" in kinds, report
        if nvml is not None:
            assert nvml >= sum(ledger.values()), report
