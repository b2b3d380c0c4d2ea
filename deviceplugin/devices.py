"""The node's GPUs as the kubelet and the extender see them. Pure: plain data in, plain data out.

Each physical GPU is advertised as `deviceSplitCount` devices with IDs `<GPU UUID>::<k>`, stable
across restarts (derived from the UUID only). The node inventory annotation describes the same
GPUs with their memory after `deviceMemoryScaling`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuwarden.annotations import GpuDevice, NodeInventory
from gpuwarden.config import Settings

__all__ = [
    "SEP",
    "DeviceIdError",
    "PhysicalGpu",
    "Slice",
    "advertise",
    "gpus_of",
    "node_inventory",
    "parse_slice_id",
    "scaled_mib",
    "slice_ids",
    "xid_is_fatal",
]

SEP = "::"


class DeviceIdError(ValueError):
    """A device ID that is not one this plugin advertises; the message names it."""


@dataclass(frozen=True, slots=True)
class PhysicalGpu:
    uuid: str
    index: int
    memory_mib: int  # the real memory, as NVML reports it
    name: str = ""
    numa: int = -1  # -1: unknown (no topology is advertised)
    healthy: bool = True
    why_unhealthy: str = ""


@dataclass(frozen=True, slots=True)
class Slice:
    id: str
    uuid: str
    healthy: bool
    numa: int


def slice_ids(uuid: str, split: int) -> tuple[str, ...]:
    return tuple(f"{uuid}{SEP}{k}" for k in range(split))


def parse_slice_id(device_id: str, known: Iterable[str] = ()) -> str:
    """The GPU UUID of a slice ID; raises DeviceIdError when it is malformed or, with `known`
    given, names a GPU this node does not have."""
    uuid, sep, k = device_id.rpartition(SEP)
    if not sep or not uuid or not k.isdigit():
        raise DeviceIdError(f"device ID {device_id!r} is not a gpuwarden slice "
                            f"(expected <GPU UUID>{SEP}<n>)")
    known = set(known)
    if known and uuid not in known:
        raise DeviceIdError(f"device ID {device_id!r} names GPU {uuid}, which this node does "
                            f"not have (it has {', '.join(sorted(known))})")
    return uuid


def gpus_of(device_ids: Sequence[str], known: Iterable[str]) -> tuple[str, ...]:
    """The distinct GPU UUIDs of device IDs, in first-seen order (errors as parse_slice_id)."""
    known = tuple(known)
    out: list[str] = []
    for d in device_ids:
        u = parse_slice_id(d, known)
        if u not in out:
            out.append(u)
    return tuple(out)


def advertise(gpus: Sequence[PhysicalGpu], split: int) -> tuple[Slice, ...]:
    return tuple(Slice(i, g.uuid, g.healthy, g.numa)
                 for g in sorted(gpus, key=lambda g: g.index) for i in slice_ids(g.uuid, split))


def scaled_mib(gpu: PhysicalGpu, settings: Settings) -> int:
    return int(gpu.memory_mib * settings.device_memory_scaling)


def node_inventory(gpus: Sequence[PhysicalGpu], settings: Settings,
                   updated: str = "") -> NodeInventory:
    return NodeInventory(
        devices=tuple(GpuDevice(uuid=g.uuid, index=g.index, memory_mib=scaled_mib(g, settings),
                                cores=100, type=g.name, numa=max(g.numa, 0), healthy=g.healthy)
                      for g in sorted(gpus, key=lambda g: g.index)),
        split_count=settings.device_split_count, updated=updated)


# XIDs that an application causes (bad address, illegal instruction, a killed context...): the
# GPU stays usable, so they do not make it unhealthy. Any other XID does.
_APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def xid_is_fatal(xid: int) -> bool:
    return xid not in _APPLICATION_XIDS
