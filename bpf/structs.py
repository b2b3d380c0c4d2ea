"""Python mirror of the structs and enums shared with the BPF programs (bpf/lib/events.h).

Defined once in C, mirrored once here; tests/bpf/test_struct_layout_matches_c.py compiles the
C header and compares sizes, offsets and enum values.  The event kinds are not mirrored but read
from the table both sides use (libvgpu/include/hooks.def).
"""

from __future__ import annotations

import ctypes
from enum import IntEnum

from libvgpu.entry_points import rows

__all__ = ["DEVICE_UNKNOWN", "EVENT_FAILED", "EVENT_KILLED", "EventKind", "GwEvent"]

DEVICE_UNKNOWN = -1
EVENT_KILLED = 0x1
EVENT_FAILED = 0x2


# What happened: the VGPU_EVENT_KIND rows of libvgpu/include/hooks.def, from which
# bpf/lib/events.h builds enum gw_kind too.  (Built from data, so mypy cannot see the members;
# nothing in Python names one: events are decoded with EventKind(value).name.)
EventKind = IntEnum(  # type: ignore[misc]  # members from data (see above)
    "EventKind", [(name, int(value)) for name, value in rows("VGPU_EVENT_KIND")])


class GwEvent(ctypes.Structure):
    """struct gw_event."""

    _fields_ = (
        ("ts_ns", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("ptr", ctypes.c_uint64),
        ("cgroup_id", ctypes.c_uint64),
        ("pid", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("kind", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("result", ctypes.c_uint32),
    )
