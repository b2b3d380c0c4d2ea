"""Python mirror of the structs and enums shared with the BPF programs (bpf/lib/events.h).

Defined once in C, mirrored once here; tests/bpf/test_struct_layout.py compiles the C header
and compares sizes, offsets and enum values.  No I/O.
"""

from __future__ import annotations

import ctypes
from enum import IntEnum

__all__ = ["DEVICE_UNKNOWN", "EVENT_FAILED", "EVENT_KILLED", "EventKind", "GwEvent"]

DEVICE_UNKNOWN = -1
EVENT_KILLED = 0x1
EVENT_FAILED = 0x2


class EventKind(IntEnum):
    MEM_ALLOC = 1
    MEM_ALLOC_PITCH = 2
    MEM_ALLOC_MANAGED = 3
    MEM_ALLOC_ASYNC = 4
    MEM_ALLOC_POOL = 5
    MEM_FREE = 6
    MEM_FREE_ASYNC = 7
    VMM_CREATE = 8
    VMM_RELEASE = 9
    ARRAY_CREATE = 10
    ARRAY3D_CREATE = 11
    MIPMAP_CREATE = 12
    ARRAY_DESTROY = 13
    MIPMAP_DESTROY = 14
    CTX_CREATE = 15
    CTX_DESTROY = 16
    PRIMARY_RETAIN = 17
    PRIMARY_RELEASE = 18
    PROC_CLEAR = 19


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
