"""Reading workload regions fast enough for every loop: the layout comes from libvgpu.region's
ctypes mirror (itself tested against the C header); a region is opened and validated once with
libvgpu.region.Region, then read through a read-only mapping with struct.unpack_from, so one read
of 100 regions costs well under a millisecond each. Writes (limits, compute overrides, reclaim)
go through Region."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from libvgpu import region as lr

__all__ = ["RegionRead", "RegionReader"]

_DEV = lr.RegionStruct.devices.offset
_DEV_SIZE = ctypes.sizeof(lr.DeviceStruct)
_PROCS = lr.RegionStruct.procs.offset
_PROC_SIZE = ctypes.sizeof(lr.ProcStruct)
_HEAD = struct.Struct("<QI")  # magic, version
_DEVF = struct.Struct("<16sIIQQ")  # uuid, state, flags, limit, used
_SLOT3 = struct.Struct("<IIQ")  # pid, state, start_time at the start of a slot
_CFLAGS = lr.DeviceStruct.compute.offset + lr.ComputeDevice.flags.offset  # from a device's start
_U32 = struct.Struct("<I")
_ACTIVE = struct.pack("<I", lr.PROC_ACTIVE)
assert lr.RegionStruct.magic.offset == 0 and lr.RegionStruct.version.offset == 8
assert (lr.DeviceStruct.state.offset, lr.DeviceStruct.limit_bytes.offset,
        lr.DeviceStruct.used_bytes.offset) == (16, 24, 32)
assert (lr.ProcStruct.pid.offset, lr.ProcStruct.state.offset,
        lr.ProcStruct.start_time.offset) == (0, 4, 8)


@dataclass(frozen=True)
class RegionRead:
    used: dict[str, int]  # device uuid -> bytes the shims admitted
    limits: dict[str, int | None]
    procs: dict[int, int]  # pid -> start time of every active slot
    # devices whose shims see no node region: they cannot coordinate compute with the other
    # containers on the GPU (VGPU_COMPUTE_FLAG_NODE_UNKNOWN)
    node_unknown: frozenset[str] = frozenset()


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD.size)
            size = os.fstat(f.fileno()).st_size
    except OSError as err:
        raise lr.RegionError(f"{path}: cannot read the region: {err.strerror}") from None
    if len(head) < _HEAD.size:
        raise lr.RegionError(f"{path}: corrupt region: {size} bytes, a version {lr.VERSION} "
                             f"region has {lr.REGION_BYTES}")
    magic, version = _HEAD.unpack(head)
    if magic != lr.MAGIC:
        raise lr.RegionError(f"{path}: corrupt region: bad magic {magic:#x} (expected "
                             f"{lr.MAGIC:#x}, a libvgpu region)")
    if version != lr.VERSION or size != lr.REGION_BYTES:
        raise lr.RegionError(f"{path}: region version {version}, {size} bytes; this agent "
                             f"reads version {lr.VERSION} ({lr.REGION_BYTES} bytes)")


class RegionReader:
    """One workload's region. open() raises lr.RegionError with a clear message."""

    def __init__(self, path: Path) -> None:
        self.path = path
        _check_header(path)  # a clear error before Region.open maps a foreign file
        self.region = lr.Region.open(path)  # validates magic, version, size
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            self._mm = mmap.mmap(fd, lr.REGION_BYTES, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self._uuids: dict[int, str] = {}

    def read(self, with_procs: bool = True) -> RegionRead:
        """Raises lr.RegionError when the header is no longer a region's (the other fields are
        taken as they are: a workload can write its region)."""
        mm = self._mm
        magic, version = _HEAD.unpack_from(mm, 0)
        if magic != lr.MAGIC or version != lr.VERSION:
            raise lr.RegionError(f"{self.path}: corrupt region: magic {magic:#x}, version "
                                 f"{version} (expected {lr.MAGIC:#x}, version {lr.VERSION})")
        used: dict[str, int] = {}
        limits: dict[str, int | None] = {}
        node_unknown: set[str] = set()
        for i in range(lr.MAX_DEVICES):
            raw, state, _flags, limit, u = _DEVF.unpack_from(mm, _DEV + i * _DEV_SIZE)
            if state != 2:
                continue
            uuid = self._uuids.get(i)
            if uuid is None:
                uuid = self._uuids[i] = lr.format_uuid(raw)
            used[uuid] = u
            limits[uuid] = lr.decode_limit(limit)
            if _U32.unpack_from(mm, _DEV + i * _DEV_SIZE + _CFLAGS)[0] & \
                    lr.COMPUTE_FLAG_NODE_UNKNOWN:
                node_unknown.add(uuid)
        procs: dict[int, int] = {}
        if with_procs:
            # the state words of every slot, 4 bytes each, found with bytes.find (C speed)
            with memoryview(mm) as base, \
                    base[_PROCS:_PROCS + _PROC_SIZE * lr.MAX_PROCS] as block, \
                    block.cast("I") as words:
                states = words[1::_PROC_SIZE // 4].tobytes()
            at = states.find(_ACTIVE)
            while at >= 0:
                if at % 4 == 0:
                    pid, state, start = _SLOT3.unpack_from(mm, _PROCS + (at // 4) * _PROC_SIZE)
                    if state == 2 and pid:
                        procs[pid] = start
                at = states.find(_ACTIVE, at + 1)
        return RegionRead(used, limits, procs, frozenset(node_unknown))

    def close(self) -> None:
        self._mm.close()
        self.region.close()
