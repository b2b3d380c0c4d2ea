"""NVML samples are validated: garbage from a struct-version mismatch (pid 0, more memory than
the device has, utilization above 100%) is rejected and counted; utilization asks only for
samples newer than the last one seen, and keeps each process's latest."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from agent.nvml import NvmlSampler

GiB = 1 << 30


class FakeNvml:
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_NOT_SUPPORTED = 3

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            self.value = value

    def __init__(self) -> None:
        self.procs: list[Any] = []
        self.util: list[Any] = []
        self.asked: list[int] = []
        self.used = 3 * GiB
        self.gpu_util = 40
        self.broken = False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return NS(total=80 * GiB, used=self.used)

    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any:
        if self.broken:
            raise self.NVMLError(15)  # NVML_ERROR_GPU_IS_LOST
        return NS(gpu=self.gpu_util, memory=0)

    def nvmlDeviceGetUUID(self, h: str) -> bytes:
        return b"GPU-aaaa"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "Fake H200"

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:
        return self.procs

    def nvmlDeviceGetProcessUtilization(self, h: str, ts: int) -> list[Any]:
        self.asked.append(ts)
        if not self.util:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return self.util


def test_memory_validation_and_util_timestamps() -> None:
    nv = FakeNvml()
    s = NvmlSampler(nv)
    (dev,) = s.open()
    assert dev.uuid == "GPU-aaaa" and dev.total_bytes == 80 * GiB
    nv.procs = [NS(pid=10, usedGpuMemory=GiB), NS(pid=0, usedGpuMemory=5),
                NS(pid=11, usedGpuMemory=2 ** 63), NS(pid=12, usedGpuMemory=None)]
    nv.util = [NS(pid=10, timeStamp=100, smUtil=20), NS(pid=10, timeStamp=200, smUtil=40),
               NS(pid=13, timeStamp=150, smUtil=250)]
    out = s.sample()
    assert out.memory == {10: {"GPU-aaaa": GiB}, 12: {"GPU-aaaa": 0}}
    assert out.sm == {10: {"GPU-aaaa": 0.4}}
    assert len(out.rejected) == 3 and s.rejected_total == 3
    nv.util = []
    assert s.sample().sm == {}  # NOT_FOUND: nothing new since the last timestamp
    assert nv.asked == [0, 200]


def test_each_gpu_is_sampled_whole_and_a_failing_one_is_unhealthy() -> None:
    nv = FakeNvml()
    s = NvmlSampler(nv)
    s.open()
    dev = s.sample().devices["GPU-aaaa"]
    assert (dev.used_bytes, dev.utilization_ratio, dev.healthy) == (3 * GiB, 0.4, True)
    nv.used, nv.gpu_util = 81 * GiB, 101  # garbage: not reported
    dev = s.sample().devices["GPU-aaaa"]
    assert (dev.used_bytes, dev.utilization_ratio, dev.healthy) == (None, None, True)
    nv.broken = True
    dev = s.sample().devices["GPU-aaaa"]
    assert not dev.healthy and dev.error
