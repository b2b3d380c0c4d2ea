"""NVML sampling through pynvml (the module is a parameter so tests pass a fake): per-process
memory from the v3 process list and per-process SM utilization since the last sample
(lastSeenTimeStamp), both validated, since a struct-version mismatch yields garbage rather than
an error (a PID of 0, memory above the device's total, utilization above 100%)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from agent.model import GpuUuid, Pid

if TYPE_CHECKING:
    from agent.edges import NvmlLib

__all__ = ["Device", "DeviceSample", "NvmlSample", "NvmlSampler", "ProcessMemoryRaw",
           "UtilSampleRaw"]


class ProcessMemoryRaw(TypedDict):
    pid: int
    usedGpuMemory: int | None


class UtilSampleRaw(TypedDict):
    pid: int
    timeStamp: int  # microseconds
    smUtil: int  # percent


@dataclass(frozen=True)
class Device:
    index: int
    uuid: GpuUuid
    name: str
    total_bytes: int
    handle: Any = field(compare=False, repr=False, default=None)


@dataclass(frozen=True)
class DeviceSample:
    """One GPU as a whole: memory used (all processes, context included), utilization over the
    driver's last sample period (0..1), and whether NVML answered for it (healthy)."""

    used_bytes: int | None = None
    utilization_ratio: float | None = None
    healthy: bool = True
    error: str = ""


@dataclass
class NvmlSample:
    devices: dict[GpuUuid, DeviceSample] = field(default_factory=dict)
    memory: dict[Pid, dict[GpuUuid, int]] = field(default_factory=dict)
    sm: dict[Pid, dict[GpuUuid, float]] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)  # what validation threw away, and why


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class NvmlSampler:
    def __init__(self, lib: NvmlLib | None = None) -> None:
        if lib is None:
            import pynvml

            lib = pynvml
        self.nv: NvmlLib = lib  # pynvml or a test's fake
        self.devices: list[Device] = []
        self._last_seen: dict[GpuUuid, int] = {}
        self.rejected_total = 0

    def open(self) -> list[Device]:
        nv = self.nv
        nv.nvmlInit()
        devices = []
        for i in range(int(nv.nvmlDeviceGetCount())):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            devices.append(Device(i, GpuUuid(_s(nv.nvmlDeviceGetUUID(h))),
                                  _s(nv.nvmlDeviceGetName(h)), int(mem.total), h))
        self.devices = devices
        return devices

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:  # already shut down or never opened
            return

    def _raw_memory(self, d: Device) -> list[ProcessMemoryRaw]:
        return [ProcessMemoryRaw(pid=int(p.pid), usedGpuMemory=p.usedGpuMemory)
                for p in self.nv.nvmlDeviceGetComputeRunningProcesses(d.handle)]

    def _raw_util(self, d: Device) -> list[UtilSampleRaw]:
        nv = self.nv
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(d.handle, self._last_seen.get(d.uuid, 0))
        except nv.NVMLError as err:
            if getattr(err, "value", None) in (nv.NVML_ERROR_NOT_FOUND,
                                               nv.NVML_ERROR_NOT_SUPPORTED):
                return []  # no sample since lastSeenTimeStamp, or not on this GPU
            raise
        return [UtilSampleRaw(pid=int(s.pid), timeStamp=int(s.timeStamp), smUtil=int(s.smUtil))
                for s in samples]

    def _device(self, d: Device) -> DeviceSample:
        nv = self.nv
        try:
            used = int(nv.nvmlDeviceGetMemoryInfo(d.handle).used)
            util = int(nv.nvmlDeviceGetUtilizationRates(d.handle).gpu)
        except nv.NVMLError as err:
            return DeviceSample(healthy=False, error=str(err))
        return DeviceSample(used_bytes=used if 0 <= used <= d.total_bytes else None,
                            utilization_ratio=util / 100.0 if 0 <= util <= 100 else None)

    def sample(self) -> NvmlSample:
        out = NvmlSample()
        for d in self.devices:
            out.devices[d.uuid] = self._device(d)
            for p in self._raw_memory(d):
                used = p["usedGpuMemory"]
                if p["pid"] <= 0:
                    out.rejected.append(f"{d.uuid}: process entry with pid {p['pid']}")
                elif used is not None and not 0 <= used <= d.total_bytes:
                    out.rejected.append(f"{d.uuid}: pid {p['pid']} uses {used} bytes, more "
                                        f"than the device's {d.total_bytes}")
                else:
                    per = out.memory.setdefault(Pid(p["pid"]), {})
                    per[d.uuid] = per.get(d.uuid, 0) + (used or 0)
            latest: dict[int, UtilSampleRaw] = {}
            for s in self._raw_util(d):
                if s["pid"] <= 0 or not 0 <= s["smUtil"] <= 100:
                    out.rejected.append(f"{d.uuid}: utilization sample {dict(s)} out of range")
                    continue
                if s["pid"] not in latest or s["timeStamp"] > latest[s["pid"]]["timeStamp"]:
                    latest[s["pid"]] = s
            if latest:
                self._last_seen[d.uuid] = max(s["timeStamp"] for s in latest.values())
            for pid, s in latest.items():
                out.sm.setdefault(Pid(pid), {})[d.uuid] = s["smUtil"] / 100.0
        self.rejected_total += len(out.rejected)
        return out
