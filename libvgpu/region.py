"""The container's shared region (libvgpu/include/vgpu_region.h), read and written from Python.

The agent and `gpuwarden run` use this module to prepare a region before a workload starts
(`Region.create`), to read what the shims count (`Region.snapshot`), to change a device's memory
limit at run time (`Region.set_memory_limit`; every admission re-reads it) and to give back what
dead processes still hold (`Region.reclaim_dead`).

The ctypes structures below mirror the C header field by field; tests/libvgpu/
test_region_layout_matches_c.py compiles a C program printing sizeof/offsetof of every field and
compares. Shared counters that live shims update with compare-and-swap are only changed here with
the same atomic instructions (through libatomic); plain stores are used only for single aligned
fields that shims merely read (limits).

This module never loads libvgpu.so and performs no I/O beyond the region file and /proc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "LIMIT_NONE",
    "MAGIC",
    "MAX_DEVICES",
    "MAX_PROCS",
    "VERSION",
    "ComputeState",
    "DeviceUsage",
    "ProcUsage",
    "Region",
    "RegionError",
    "RegionSnapshot",
    "RegionStruct",
    "decode_limit",
    "encode_limit",
    "format_uuid",
    "parse_uuid",
    "proc_alive",
    "proc_start_time",
]

MAGIC = 0x3147455257504756  # "VGPWREG1" read little-endian
VERSION = 1
MAX_DEVICES = 16
MAX_PROCS = 1024
LIMIT_NONE = 2**64 - 1


def encode_limit(limit_bytes: int | None, where: str) -> int:
    """A device's memory limit as the file holds it: None (no limit) is UINT64_MAX, 0 admits
    nothing. The one place that writes the encoding (`where` names the region and device in
    the error)."""
    if limit_bytes is None:
        return LIMIT_NONE
    if isinstance(limit_bytes, bool) or not 0 <= limit_bytes < LIMIT_NONE:
        raise RegionError(f"{where}: limit {limit_bytes!r} is not valid (bytes 0..2^64-2, or None "
                          "for no limit)")
    return int(limit_bytes)


def decode_limit(raw: int) -> int | None:
    """`encode_limit` undone: None for no limit, else the bytes (0: admits nothing)."""
    return None if raw == LIMIT_NONE else int(raw)

DEVICE_FREE, DEVICE_READY = 0, 2
PROC_FREE, PROC_CLAIMING, PROC_ACTIVE, PROC_RECLAIMING = 0, 1, 2, 3

u8, u32, u64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64
_CData = TypeVar("_CData", bound="ctypes._SimpleCData[Any]")  # a field viewed in place


class ComputeDevice(ctypes.Structure):
    """struct vgpu_compute_device (vgpu_compute.h; owned by the compute limiter)."""

    _fields_ = [
        ("tat_ns", u64),
        ("limit_pct", u32),
        ("agent_limit_pct", u32),
        ("agent_yield", u32),
        ("effective_pct", u32),
        ("flags", u32),
        ("config_state", u32),
        ("charged_ns", u64),
        ("waited_ns", u64),
        ("launches", u64),
        ("cost_scale_ppm", u32),
        ("sat_mhz", u32),
    ]


class ComputeContainer(ctypes.Structure):
    """struct vgpu_compute_container (vgpu_compute.h)."""

    _fields_ = [
        ("priority", u32),
        ("core_policy", u32),
        ("container_id", u64),
        ("config_state", u32),
        ("reserved0", u32),
        ("long_until_ns", u64),
        ("reserved", u64 * 4),
    ]


class ComputeProc(ctypes.Structure):
    """struct vgpu_compute_proc (vgpu_compute.h)."""

    _fields_ = [
        ("active_ns", u64),
        ("waited_ns", u64),
        ("yielding", u32),
        ("split_devs", u32),
        ("busy_until_ns", u64),
    ]


class DeviceStruct(ctypes.Structure):
    """struct vgpu_region_device."""

    _fields_ = [
        ("uuid", u8 * 16),
        ("state", u32),
        ("flags", u32),
        ("limit_bytes", u64),
        ("used_bytes", u64),
        ("peak_bytes", u64),
        ("oom_count", u64),
        ("reserved", u64),
        ("compute", ComputeDevice),
    ]


class ProcStruct(ctypes.Structure):
    """struct vgpu_region_proc."""

    _fields_ = [
        ("pid", u32),
        ("state", u32),
        ("start_time", u64),
        ("used_bytes", u64 * MAX_DEVICES),
        ("context_bytes", u64 * MAX_DEVICES),
        ("compute", ComputeProc),
    ]


class RegionStruct(ctypes.Structure):
    """struct vgpu_region."""

    _fields_ = [
        ("magic", u64),
        ("version", u32),
        ("flags", u32),
        ("total_bytes", u64),
        ("max_devices", u32),
        ("max_procs", u32),
        ("reserved", u64 * 4),
        ("compute", ComputeContainer),
        ("devices", DeviceStruct * MAX_DEVICES),
        ("procs", ProcStruct * MAX_PROCS),
    ]


REGION_BYTES = ctypes.sizeof(RegionStruct)


COMPUTE_AGENT_UNLIMITED = 101
COMPUTE_YIELD = {"auto": 0, "yield": 1, "run": 2}
COMPUTE_POLICIES = ("default", "force", "disable")
COMPUTE_FLAG_SHARING, COMPUTE_FLAG_LIMITED = 0x1, 0x2
COMPUTE_FLAG_YIELDING, COMPUTE_FLAG_NODE_UNKNOWN = 0x4, 0x8
COMPUTE_FLAG_TURNS, COMPUTE_FLAG_LIGHT = 0x10, 0x20


@dataclass(frozen=True)
class ComputeState:
    """A device's compute block as the shims left it (vgpu_compute.h)."""

    limit_pct: int
    effective_pct: int
    sharing: bool
    yielding: bool
    node_unknown: bool
    charged_ns: int
    waited_ns: int
    launches: int
    priority: int
    policy: str
    cost_scale: float = 1.0  # correction of charged costs: DVFS x busy feedback (1.0: none)
    sat_mhz: int = 0  # SM clock the shims saw on the saturated GPU (0: none yet)
    turns: bool = False  # takes turns with other paced containers on the GPU
    light: bool = False  # uses little of its share: claims the GPU while busy (docs/compute.md)


class RegionError(Exception):
    """A region file that cannot be used, or a bad argument; the message names both."""


@dataclass(frozen=True)
class ProcUsage:
    pid: int
    start_time: int
    used_bytes: int
    context_bytes: int
    alive: bool


@dataclass(frozen=True)
class DeviceUsage:
    index: int
    uuid: str
    limit_bytes: int | None  # None: no limit (the whole GPU); 0: admits nothing
    used_bytes: int
    peak_bytes: int
    oom_count: int
    processes: tuple[ProcUsage, ...]


@dataclass(frozen=True)
class RegionSnapshot:
    path: str
    version: int
    devices: tuple[DeviceUsage, ...]

    def device(self, uuid_or_index: str | int) -> DeviceUsage:
        for d in self.devices:
            if uuid_or_index in (d.uuid, d.index):
                return d
        raise KeyError(uuid_or_index)


def format_uuid(raw: bytes) -> str:
    h = bytes(raw).hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def parse_uuid(text: str) -> bytes:
    """'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx' (or MIG-...) -> 16 raw bytes."""
    prefix, sep, rest = text.partition("-")
    digits = rest.replace("-", "")
    if not sep or prefix not in ("GPU", "MIG") or len(digits) != 32:
        raise RegionError(
            f"device UUID {text!r} is not valid: expected GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
            " (32 hex digits)"
        )
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise RegionError(f"device UUID {text!r} holds non-hex digits") from None


def _proc_stat(pid: int, proc_root: Path) -> tuple[str, int] | None:
    """State (field 3) and start time (field 22) of /proc/<pid>/stat; None when unreadable."""
    try:
        data = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = data[data.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])  # fields[0] is field 3
    except (IndexError, ValueError):
        return None


def proc_start_time(pid: int, proc_root: Path = Path("/proc")) -> int:
    """Field 22 of /proc/<pid>/stat (clock ticks after boot); 0 when unreadable."""
    stat = _proc_stat(pid, proc_root)
    return 0 if stat is None else stat[1]


def proc_alive(pid: int, start_time: int, proc_root: Path = Path("/proc")) -> bool:
    """Same rule as the shim: dead if no such pid, a zombie (exited, not yet reaped: its GPU
    memory is gone), or the pid now belongs to a later process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    stat = _proc_stat(pid, proc_root)
    if stat is None:
        return True  # no /proc view of it (another pid namespace): kill() found it
    state, now = stat
    return state not in ("Z", "X") and now == start_time


AliveFn = Callable[[int, int], bool]


class _Atomics:
    """64/32-bit atomics on shared memory, the same instructions the shim's __atomic builtins use
    (libatomic's lock-free paths)."""

    def __init__(self) -> None:
        name = ctypes.util.find_library("atomic") or "libatomic.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as err:
            raise RegionError(
                f"reclaiming needs libatomic ({name}: {err}); install libatomic1"
            ) from None
        self.cas8 = getattr(lib, "__atomic_compare_exchange_8")
        self.cas8.argtypes = [ctypes.c_void_p, ctypes.c_void_p, u64, ctypes.c_int, ctypes.c_int]
        self.cas8.restype = ctypes.c_bool
        self.cas4 = getattr(lib, "__atomic_compare_exchange_4")
        self.cas4.argtypes = [ctypes.c_void_p, ctypes.c_void_p, u32, ctypes.c_int, ctypes.c_int]
        self.cas4.restype = ctypes.c_bool
        self.xchg8 = getattr(lib, "__atomic_exchange_8")
        self.xchg8.argtypes = [ctypes.c_void_p, u64, ctypes.c_int]
        self.xchg8.restype = u64

    def cas32(self, field: ctypes.c_uint32, expected: int, desired: int) -> bool:
        exp = u32(expected)
        return bool(self.cas4(ctypes.addressof(field), ctypes.addressof(exp), desired, 5, 5))

    def sat_sub64(self, field: ctypes.c_uint64, amount: int) -> None:
        cur = u64(field.value)
        while True:
            nxt = cur.value - amount if cur.value > amount else 0
            if self.cas8(ctypes.addressof(field), ctypes.addressof(cur), nxt, 5, 5):
                return

    def exchange64(self, field: ctypes.c_uint64, value: int) -> int:
        return int(self.xchg8(ctypes.addressof(field), value, 5))

    def cas64(self, field: ctypes.c_uint64, expected: int, desired: int) -> bool:
        exp = u64(expected)
        return bool(self.cas8(ctypes.addressof(field), ctypes.addressof(exp), desired, 5, 5))


def _validate(r: RegionStruct, path: Path) -> None:
    if r.magic != MAGIC:
        raise RegionError(
            f"{path}: not a gpuwarden region (magic 0x{r.magic:016x}, expected 0x{MAGIC:016x})"
        )
    if (r.version, r.total_bytes, r.max_devices, r.max_procs) != (
        VERSION,
        REGION_BYTES,
        MAX_DEVICES,
        MAX_PROCS,
    ):
        raise RegionError(
            f"{path}: region version {r.version} ({r.max_devices} devices, {r.max_procs} process"
            f" slots, {r.total_bytes} bytes); this gpuwarden reads version {VERSION}"
            f" ({MAX_DEVICES}, {MAX_PROCS}, {REGION_BYTES} bytes)"
        )


class Region:
    """An open region file. Use as a context manager or call close()."""

    def __init__(self, path: Path, fd: int, mm: mmap.mmap) -> None:
        self.path = path
        self._fd = fd
        self._mm = mm
        self._r: RegionStruct | None = RegionStruct.from_buffer(mm)
        self._atomics: _Atomics | None = None

    # ---- opening --------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Region:
        """Open an existing region; a foreign, truncated or other-version file is refused."""
        p = Path(path)
        try:
            fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
        except OSError as err:
            raise RegionError(f"{p}: cannot open the region: {err.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            if size != REGION_BYTES:
                raise RegionError(
                    f"{p}: size is {size} bytes, a version {VERSION} region has {REGION_BYTES}"
                )
            mm = mmap.mmap(fd, REGION_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        try:
            # validated on a copy: a view into the map, kept alive by the error's traceback,
            # would stop the map from closing (BufferError instead of this RegionError)
            _validate(RegionStruct.from_buffer_copy(mm), p)
        except BaseException:
            mm.close()
            os.close(fd)
            raise
        return cls(p, fd, mm)

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        devices: Sequence[tuple[str, int | None]],
        *,
        replace: bool = False,
    ) -> Region:
        """Create a region for devices [(uuid, limit_bytes or None for no limit), ...].

        An existing non-empty file is refused unless replace=True (then it is rewritten; do that
        only before the container's processes start)."""
        p = Path(path)
        if len(devices) > MAX_DEVICES:
            raise RegionError(f"{p}: {len(devices)} devices given, a region holds {MAX_DEVICES}")
        raw: list[tuple[bytes, int]] = []
        for i, (uuid, limit) in enumerate(devices):
            raw.append((parse_uuid(uuid), encode_limit(limit, f"{p}: device {i} ({uuid})")))
        if len({u for u, _ in raw}) != len(raw):
            raise RegionError(f"{p}: the same device UUID is given twice")
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as err:
            raise RegionError(f"{p}: cannot create the region: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size != 0 and not replace:
                raise RegionError(f"{p}: already exists (pass replace=True to rewrite it)")
            os.ftruncate(fd, 0)
            os.ftruncate(fd, REGION_BYTES)
            mm = mmap.mmap(fd, REGION_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            region = cls(p, fd, mm)
            r = region._struct
            r.version, r.flags, r.total_bytes = VERSION, 0, REGION_BYTES
            r.max_devices, r.max_procs = MAX_DEVICES, MAX_PROCS
            for i, (uuid_raw, limit) in enumerate(raw):
                d = r.devices[i]
                ctypes.memmove(d.uuid, uuid_raw, 16)
                d.limit_bytes = limit
                d.state = DEVICE_READY
            r.magic = MAGIC  # last: a reader that sees it sees the rest
            fcntl.flock(fd, fcntl.LOCK_UN)
            return region
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        if self._r is None:
            return
        self._r = None
        self._mm.close()
        os.close(self._fd)

    def __enter__(self) -> Region:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _struct(self) -> RegionStruct:
        if self._r is None:
            raise RegionError(f"{self.path}: the region is closed")
        return self._r

    @contextmanager
    def _locked_if_free(self) -> Iterator[bool]:
        """The file lock if nobody holds it now (yields True), else False at once: a process of
        the container stopped inside its lock must never stall the agent."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    # ---- reading -----------------------------------------------------------------------------

    def _device_index(self, device: str | int) -> int:
        r = self._struct
        ready = [i for i in range(MAX_DEVICES) if r.devices[i].state == DEVICE_READY]
        if isinstance(device, int):
            if device in ready:
                return device
            raise RegionError(
                f"{self.path}: no device entry {device} (entries in use: {ready or 'none'})"
            )
        want = parse_uuid(device)
        for i in ready:
            if bytes(r.devices[i].uuid) == want:
                return i
        known = [format_uuid(bytes(r.devices[i].uuid)) for i in ready]
        raise RegionError(f"{self.path}: no device {device} (devices: {known or 'none'})")

    def snapshot(self, alive: AliveFn | None = None) -> RegionSnapshot:
        """Per device: limit, usage and the processes counting on it (alive per `alive`, by
        default the shim's own rule in this PID namespace)."""
        is_alive = alive or proc_alive
        r = self._struct
        procs = [
            (s.pid, s.start_time, list(s.used_bytes), list(s.context_bytes))
            for s in r.procs
            if s.state == PROC_ACTIVE
        ]
        liveness = {(pid, st): is_alive(pid, st) for pid, st, _, _ in procs}
        devices = []
        for i in range(MAX_DEVICES):
            d = r.devices[i]
            if d.state != DEVICE_READY:
                continue
            members = tuple(
                ProcUsage(pid, st, used[i], ctx[i], liveness[(pid, st)])
                for pid, st, used, ctx in procs
                if used[i] or ctx[i]
            )
            limit = int(d.limit_bytes)
            devices.append(
                DeviceUsage(
                    index=i,
                    uuid=format_uuid(bytes(d.uuid)),
                    limit_bytes=decode_limit(limit),
                    used_bytes=int(d.used_bytes),
                    peak_bytes=int(d.peak_bytes),
                    oom_count=int(d.oom_count),
                    processes=members,
                )
            )
        return RegionSnapshot(str(self.path), int(r.version), tuple(devices))

    # ---- writing -----------------------------------------------------------------------------

    def set_memory_limit(self, device: str | int, limit_bytes: int | None) -> None:
        """Change a device's limit (None: no limit). Takes effect at the next admission; what is
        already allocated stays allocated."""
        raw = encode_limit(limit_bytes, f"{self.path}: device {device}")
        i = self._device_index(device)
        # one aligned 8-byte store; shims only load this field
        self._struct.devices[i].limit_bytes = raw

    # ---- compute (vgpu_compute.h; docs/compute.md) ------------------------------------------

    def set_compute_limit(self, device: str | int, percent: int) -> None:
        """Change a device's configured gpucores (0 = none). Every shim process applies it
        within one tick (10 ms); it also marks the device configured, so a later process's
        CUDA_DEVICE_SM_LIMIT no longer applies."""
        if not 0 <= percent <= 100:
            raise RegionError(
                f"{self.path}: compute limit {percent} for device {device} is not valid"
                " (percent 0..100, 0 = no limit)"
            )
        d = self._struct.devices[self._device_index(device)].compute
        d.limit_pct = percent  # aligned 4-byte stores; shims only load these
        d.config_state = 1

    def set_compute_override(
        self, device: str | int, limit: int | None = None, yield_: str = "auto"
    ) -> None:
        """The agent's override of the policy/priority table for a device: `limit` None (no
        override), 0 (not limited) or 1..100 percent; `yield_` "auto", "yield" or "run"."""
        if limit is not None and not 0 <= limit <= 100:
            raise RegionError(
                f"{self.path}: override limit {limit} for device {device} is not valid"
                " (None, or percent 0..100 where 0 = not limited)"
            )
        if yield_ not in COMPUTE_YIELD:
            raise RegionError(
                f"{self.path}: override yield {yield_!r} for device {device} is not valid"
                f" (one of {', '.join(COMPUTE_YIELD)})"
            )
        d = self._struct.devices[self._device_index(device)].compute
        if limit is None:
            d.agent_limit_pct = 0
        else:
            d.agent_limit_pct = COMPUTE_AGENT_UNLIMITED if limit == 0 else limit
        d.agent_yield = COMPUTE_YIELD[yield_]

    def compute_state(self, device: str | int) -> ComputeState:
        """What the shims apply on a device now, and what it cost."""
        r = self._struct
        d = r.devices[self._device_index(device)].compute
        return ComputeState(
            limit_pct=int(d.limit_pct),
            effective_pct=int(d.effective_pct),
            sharing=bool(d.flags & COMPUTE_FLAG_SHARING),
            yielding=bool(d.flags & COMPUTE_FLAG_YIELDING),
            node_unknown=bool(d.flags & COMPUTE_FLAG_NODE_UNKNOWN),
            turns=bool(d.flags & COMPUTE_FLAG_TURNS),
            light=bool(d.flags & COMPUTE_FLAG_LIGHT),
            charged_ns=int(d.charged_ns),
            waited_ns=int(d.waited_ns),
            launches=int(d.launches),
            cost_scale=d.cost_scale_ppm / 1e6 if d.cost_scale_ppm else 1.0,
            sat_mhz=int(d.sat_mhz),
            priority=int(r.compute.priority),
            policy=COMPUTE_POLICIES[r.compute.core_policy]
            if r.compute.core_policy < len(COMPUTE_POLICIES)
            else str(r.compute.core_policy),
        )

    def reclaim_dead(self, alive: AliveFn | None = None) -> int:
        """Give back what dead processes' slots still count (the shims do the same lazily).
        Returns the number of slots reclaimed."""
        if self._atomics is None:
            self._atomics = _Atomics()
        at = self._atomics
        is_alive = alive or proc_alive
        r = self._struct
        reclaimed = active = 0
        # slots are taken back by compare-and-swap, no lock (the shims do the same)
        for s in r.procs:
            st = s.state
            if st == PROC_FREE:
                continue
            if st != PROC_ACTIVE or is_alive(s.pid, s.start_time):
                active += 1
                continue
            if not at.cas32(_field(s, "state", u32), PROC_ACTIVE, PROC_RECLAIMING):
                active += 1
                continue
            for d in range(MAX_DEVICES):
                used = at.exchange64(_elem(s.used_bytes, d), 0)
                if used:
                    at.sat_sub64(_field(r.devices[d], "used_bytes", u64), used)
                s.context_bytes[d] = 0
            s.pid, s.start_time = 0, 0
            s.state = PROC_FREE
            reclaimed += 1
        if active == 0:
            with self._locked_if_free() as locked:
                for d in r.devices if locked else ():
                    used = int(d.used_bytes)
                    if used:
                        at.cas64(_field(d, "used_bytes", u64), used, 0)
        return reclaimed


def _field(struct: ctypes.Structure, name: str, ctype: type[_CData]) -> _CData:
    """The ctypes object viewing one field of a structure in place (for its address)."""
    offset = getattr(type(struct), name).offset
    return ctype.from_address(ctypes.addressof(struct) + offset)


def _elem(array: ctypes.Array[ctypes.c_uint64], index: int) -> ctypes.c_uint64:
    return u64.from_address(ctypes.addressof(array) + index * ctypes.sizeof(u64))
