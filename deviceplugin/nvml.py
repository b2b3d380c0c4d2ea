"""The node's GPUs from NVML (pynvml; the module is a parameter so tests pass a fake).

`NvmlInventory.read()` lists every GPU with its health: a GPU that NVML can no longer query (lost,
fallen off the bus) or that raised a critical XID since the last read is unhealthy. XIDs come
from NVML's event API where the driver offers it; without it (the simulated driver) only lost
GPUs are seen.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from deviceplugin.devices import PhysicalGpu, xid_is_fatal

__all__ = ["NvmlInventory"]


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class NvmlInventory:
    def __init__(self, lib: Any = None, sys_root: str = "/sys") -> None:
        if lib is None:
            import pynvml

            lib = pynvml
        self.nv = lib
        self.sys_root = sys_root
        self._known: dict[int, tuple[str, int, str, int]] = {}  # index -> uuid, mib, name, numa
        self._xid: dict[str, str] = {}  # uuid -> why unhealthy (sticky)
        self._events: Any = None
        self.count = 0

    def open(self) -> NvmlInventory:
        self.nv.nvmlInit()
        self.count = int(self.nv.nvmlDeviceGetCount())
        with contextlib.suppress(Exception):
            es = self.nv.nvmlEventSetCreate()
            for i in range(self.count):
                h = self.nv.nvmlDeviceGetHandleByIndex(i)
                self.nv.nvmlDeviceRegisterEvents(h, self.nv.nvmlEventTypeXidCriticalError, es)
            self._events = es
        return self

    def _numa(self, handle: Any) -> int:
        with contextlib.suppress(Exception):
            return int(self.nv.nvmlDeviceGetNumaNodeId(handle))
        with contextlib.suppress(Exception):
            bus = _s(self.nv.nvmlDeviceGetPciInfo(handle).busId).lower()
            bus = bus[4:] if len(bus) > 12 else bus  # NVML's 8-digit domain, sysfs' 4
            return int(Path(self.sys_root, "bus/pci/devices", bus, "numa_node").read_text())
        return -1

    def wait_xid(self, timeout_ms: int) -> bool:
        """Wait up to timeout_ms for an XID event and note a fatal one; False at once when the
        driver offers no events."""
        if self._events is None:
            return False
        try:
            ev = self.nv.nvmlEventSetWait_v2(self._events, timeout_ms)
        except Exception:
            return True  # a timeout
        if ev.eventType == self.nv.nvmlEventTypeXidCriticalError and \
                xid_is_fatal(int(ev.eventData)):
            with contextlib.suppress(Exception):
                self._xid[_s(self.nv.nvmlDeviceGetUUID(ev.device))] = f"XID {ev.eventData}"
        return True

    def read(self) -> tuple[PhysicalGpu, ...]:
        out = []
        for i in range(self.count):
            try:
                h = self.nv.nvmlDeviceGetHandleByIndex(i)
                uuid = _s(self.nv.nvmlDeviceGetUUID(h))
                mib = int(self.nv.nvmlDeviceGetMemoryInfo(h).total) >> 20
                if i not in self._known or self._known[i][0] != uuid:
                    self._known[i] = (uuid, mib, _s(self.nv.nvmlDeviceGetName(h)),
                                      self._numa(h))
                uuid, mib, name, numa = self._known[i]
                why = self._xid.get(uuid, "")
                out.append(PhysicalGpu(uuid, i, mib, name, numa, not why, why))
            except Exception as err:
                if i in self._known:  # a GPU we knew: it is lost
                    uuid, mib, name, numa = self._known[i]
                    out.append(PhysicalGpu(uuid, i, mib, name, numa, False,
                                           f"NVML cannot query it: {err}"))
        return tuple(out)
