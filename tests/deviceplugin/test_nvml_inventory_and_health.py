"""The NVML edge: the GPUs of the simulated driver through the real pynvml, and health from a
lost GPU or a critical XID (a scripted NVML, since the simulated driver has no events)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from deviceplugin.nvml import NvmlInventory

PROBE = """
from deviceplugin.nvml import NvmlInventory
inv = NvmlInventory().open()
for g in inv.read():
    print(g.index, g.uuid, g.memory_mib, g.name, g.numa, g.healthy)
print("waits", inv.wait_xid(1))
"""


def test_real_pynvml_on_the_simulated_gpu_lists_every_gpu(make_sim_gpu) -> None:
    sim = make_sim_gpu(devices=2, memory="4GiB")
    out = subprocess.run([sys.executable, "-c", PROBE], env=sim.env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    rows = [line.split(" ") for line in out[:-1]]
    assert [r[0] for r in rows] == ["0", "1"]
    assert all(r[1].startswith("GPU-") for r in rows) and rows[0][1] != rows[1][1]
    assert {r[2] for r in rows} == {"4096"} and {r[-1] for r in rows} == {"True"}
    assert out[-1] == "waits False"  # no NVML events on the sim: the plugin polls


class NVMLError(Exception):
    pass


class ScriptedNvml:
    nvmlEventTypeXidCriticalError = 8

    def __init__(self) -> None:
        self.lost: set[int] = set()
        self.events: list[Any] = []

    def nvmlInit(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i in self.lost:
            raise NVMLError("GPU is lost")
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return f"GPU-{h}"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return SimpleNamespace(total=80 << 30)

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetNumaNodeId(self, h: int) -> int:
        return h

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceRegisterEvents(self, h: int, kind: int, es: str) -> None: ...

    def nvmlEventSetWait_v2(self, es: str, timeout_ms: int) -> Any:
        if not self.events:
            raise NVMLError("timeout")
        return self.events.pop(0)


def test_lost_gpu_and_critical_xid_make_it_unhealthy_application_xids_do_not() -> None:
    nv = ScriptedNvml()
    inv = NvmlInventory(nv).open()
    assert [(g.uuid, g.numa, g.healthy) for g in inv.read()] == [("GPU-0", 0, True),
                                                                 ("GPU-1", 1, True)]
    nv.events = [SimpleNamespace(eventType=8, eventData=13, device=1)]  # an application XID
    assert inv.wait_xid(10)
    assert all(g.healthy for g in inv.read())
    nv.events = [SimpleNamespace(eventType=8, eventData=79, device=1)]  # fell off the bus
    inv.wait_xid(10)
    gpus = {g.uuid: g for g in inv.read()}
    assert not gpus["GPU-1"].healthy and gpus["GPU-1"].why_unhealthy == "XID 79"
    nv.lost = {0}
    gpus = {g.uuid: g for g in inv.read()}
    assert not gpus["GPU-0"].healthy and "GPU is lost" in gpus["GPU-0"].why_unhealthy
    assert gpus["GPU-0"].memory_mib == 80 << 10  # still listed, as the kubelet knew it
