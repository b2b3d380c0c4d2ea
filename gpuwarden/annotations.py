"""The Kubernetes annotations gpuwarden components exchange, as frozen dataclasses.

Node inventory (the device plugin writes it on its Node, the extender reads it) and pod
assignment (the extender writes it at bind, the device plugin and the agent read it), each with
the HAMi-compatible mirror that costs nothing to write. Pure: encode to and decode from the
annotation strings; a bad value raises `AnnotationError` naming the annotation, the place inside
it and what would be valid.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "ALLOCATED",
    "ALLOCATIONS",
    "ASSIGNMENT",
    "BIND_PHASE",
    "HAMI_BIND_PHASE",
    "HAMI_BIND_TIME",
    "HAMI_DEVICES_ALLOCATED",
    "HAMI_DEVICES_TO_ALLOCATE",
    "HAMI_GPU_POLICY",
    "HAMI_NODE_POLICY",
    "HAMI_NODE_REGISTER",
    "HAMI_VGPU_NODE",
    "HAMI_WEBHOOK_LABEL",
    "NODE_GPUS",
    "NOUSE_GPUTYPE",
    "NOUSE_GPUUUID",
    "USE_GPUTYPE",
    "USE_GPUUUID",
    "AnnotationError",
    "BindPhase",
    "ContainerAssignment",
    "DeviceGrant",
    "GpuDevice",
    "NodeAllocations",
    "NodeInventory",
    "PodAssignment",
    "Reservation",
    "assignment_annotations",
    "decode_allocated",
    "decode_allocations",
    "decode_assignment",
    "decode_bind_phase",
    "decode_hami_register",
    "decode_node_gpus",
    "encode_allocated",
    "encode_allocations",
    "encode_assignment",
    "encode_hami_devices",
    "encode_hami_register",
    "encode_node_gpus",
    "node_inventory",
]

# Node annotations.
NODE_GPUS = "gpuwarden.io/node-gpus"
ALLOCATIONS = "gpuwarden.io/allocations"  # the extender's ledger of what pods hold (see below)
HAMI_NODE_REGISTER = "hami.io/node-nvidia-register"
# Pod annotations written at bind.
ASSIGNMENT = "gpuwarden.io/assignment"
BIND_PHASE = "gpuwarden.io/bind-phase"
ALLOCATED = "gpuwarden.io/allocated"  # the device plugin's list of allocated containers
HAMI_VGPU_NODE = "hami.io/vgpu-node"
HAMI_DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
HAMI_DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_BIND_PHASE = "hami.io/bind-phase"
HAMI_BIND_TIME = "hami.io/bind-time"
# Pod annotations and labels users write (HAMi's names).
USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
USE_GPUUUID = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID = "nvidia.com/nouse-gpuuuid"
HAMI_NODE_POLICY = "hami.io/node-scheduler-policy"
HAMI_GPU_POLICY = "hami.io/gpu-scheduler-policy"
HAMI_WEBHOOK_LABEL = "hami.io/webhook"  # value "ignore": the webhook leaves the pod alone

VERSION = 1
BindPhase = Literal["allocating", "success", "failed"]
BIND_PHASES: tuple[str, ...] = get_args(BindPhase)
CorePolicy = Literal["default", "force", "disable"]
CORE_POLICIES: tuple[str, ...] = get_args(CorePolicy)


class AnnotationError(ValueError):
    """An annotation that cannot be decoded; the message names it and says what is wrong."""


@dataclass(frozen=True, slots=True)
class GpuDevice:
    uuid: str
    index: int
    memory_mib: int  # after deviceMemoryScaling
    cores: int = 100
    type: str = ""
    numa: int = 0
    healthy: bool = True


@dataclass(frozen=True, slots=True)
class NodeInventory:
    devices: tuple[GpuDevice, ...]
    split_count: int = 10
    updated: str = ""  # RFC 3339, when the device plugin wrote it


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One GPU given to one container: its memory limit (MiB) and cores (0 = no limit)."""

    uuid: str
    index: int
    memory_mib: int
    cores: int


@dataclass(frozen=True, slots=True)
class ContainerAssignment:
    name: str
    devices: tuple[DeviceGrant, ...]
    init: bool = False
    priority: int = 1
    core_policy: CorePolicy = "default"


@dataclass(frozen=True, slots=True)
class PodAssignment:
    node: str
    containers: tuple[ContainerAssignment, ...]
    rule: str = ""  # the policy rule that decided the limits ("" = defaults only)

    def container(self, name: str) -> ContainerAssignment | None:
        for c in self.containers:
            if c.name == name:
                return c
        return None


# ---- decoding helpers --------------------------------------------------------------------------

class _Reader:
    """Typed access into decoded JSON that names the annotation and the path on error."""

    def __init__(self, annotation: str) -> None:
        self.annotation = annotation

    def fail(self, where: str, what: str) -> AnnotationError:
        at = f" at {where}" if where else ""
        return AnnotationError(f"annotation {self.annotation}{at}: {what}")

    def load(self, text: str) -> object:
        if not isinstance(text, str):
            raise self.fail("", f"must be a string, got {type(text).__name__}")
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise self.fail("", f"is not valid JSON ({err.msg} at character {err.pos})") from None

    def obj(self, value: object, where: str) -> Mapping[str, object]:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a JSON object, got {_kind(value)}")
        return value

    def items(self, value: object, where: str) -> list[object]:
        if not isinstance(value, list):
            raise self.fail(where, f"must be a JSON list, got {_kind(value)}")
        return value

    def field(self, doc: Mapping[str, object], key: str, where: str) -> object:
        if key not in doc:
            raise self.fail(where, f"the key {key!r} is missing")
        return doc[key]

    def str_(self, doc: Mapping[str, object], key: str, where: str, default: str | None = None,
             ) -> str:
        if default is not None and key not in doc:
            return default
        v = self.field(doc, key, where)
        if not isinstance(v, str):
            raise self.fail(_at(where, key), f"must be a string, got {_kind(v)}")
        return v

    def int_(self, doc: Mapping[str, object], key: str, where: str, low: int, high: int,
             default: int | None = None) -> int:
        if default is not None and key not in doc:
            return default
        v = self.field(doc, key, where)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(_at(where, key), f"must be a whole number, got {_kind(v)}")
        if not low <= v <= high:
            raise self.fail(_at(where, key), f"{v} is out of range {low}..{high}")
        return v

    def bool_(self, doc: Mapping[str, object], key: str, where: str, default: bool) -> bool:
        if key not in doc:
            return default
        v = doc[key]
        if not isinstance(v, bool):
            raise self.fail(_at(where, key), f"must be true or false, got {_kind(v)}")
        return v

    def version(self, doc: Mapping[str, object]) -> None:
        v = self.field(doc, "version", "")
        if v != VERSION:
            raise self.fail("version", f"{v!r} is not a version this gpuwarden reads "
                            f"(it reads {VERSION})")

    def document(self, text: str, key: str) -> tuple[Mapping[str, object], list[object]]:
        """A versioned JSON object and its list under `key`."""
        doc = self.obj(self.load(text), "")
        self.version(doc)
        return doc, self.items(self.field(doc, key, ""), key)


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(value), "a value")


_MAX_MIB = 1 << 40
_MAX_INDEX = 1 << 16


# ---- node inventory -----------------------------------------------------------------------------

def encode_node_gpus(inventory: NodeInventory) -> str:
    return json.dumps({
        "version": VERSION,
        "splitCount": inventory.split_count,
        "devices": [{"uuid": d.uuid, "index": d.index, "memoryMiB": d.memory_mib,
                     "cores": d.cores, "type": d.type, "numa": d.numa, "healthy": d.healthy}
                    for d in inventory.devices],
        "updated": inventory.updated,
    }, separators=(",", ":"))


def decode_node_gpus(text: str) -> NodeInventory:
    r = _Reader(NODE_GPUS)
    doc, items = r.document(text, "devices")
    devices = []
    for i, raw in enumerate(items):
        where = f"devices[{i}]"
        d = r.obj(raw, where)
        uuid = r.str_(d, "uuid", where)
        if not uuid:
            raise r.fail(f"{where}.uuid", "must not be empty (a GPU UUID like GPU-8f1c...)")
        devices.append(GpuDevice(
            uuid=uuid,
            index=r.int_(d, "index", where, 0, _MAX_INDEX),
            memory_mib=r.int_(d, "memoryMiB", where, 0, _MAX_MIB),
            cores=r.int_(d, "cores", where, 0, 100, default=100),
            type=r.str_(d, "type", where, default=""),
            numa=r.int_(d, "numa", where, -1, _MAX_INDEX, default=0),
            healthy=r.bool_(d, "healthy", where, True),
        ))
    _unique_uuids(r, devices)
    return NodeInventory(
        devices=tuple(devices),
        split_count=r.int_(doc, "splitCount", "", 1, 1024, default=10),
        updated=r.str_(doc, "updated", "", default=""),
    )


def _unique_uuids(r: _Reader, devices: Sequence[GpuDevice]) -> None:
    seen: set[str] = set()
    for i, d in enumerate(devices):
        if d.uuid in seen:
            raise r.fail(f"devices[{i}].uuid", f"{d.uuid} is listed twice")
        seen.add(d.uuid)


def encode_hami_register(inventory: NodeInventory) -> str:
    """HAMi's `hami.io/node-nvidia-register` list (count = slices per GPU)."""
    return json.dumps([{"id": d.uuid, "index": d.index, "count": inventory.split_count,
                        "devmem": d.memory_mib, "devcore": d.cores, "type": d.type,
                        "numa": d.numa, "health": d.healthy, "mode": "hami-core"}
                       for d in inventory.devices], separators=(",", ":"))


def decode_hami_register(text: str) -> NodeInventory:
    """A node registered by HAMi's device plugin: its list read as our inventory."""
    r = _Reader(HAMI_NODE_REGISTER)
    devices, counts = [], set()
    for i, raw in enumerate(r.items(r.load(text), "")):
        where = f"[{i}]"
        d = r.obj(raw, where)
        counts.add(r.int_(d, "count", where, 1, 1024, default=10))
        devices.append(GpuDevice(
            uuid=r.str_(d, "id", where),
            index=r.int_(d, "index", where, 0, _MAX_INDEX, default=i),
            memory_mib=r.int_(d, "devmem", where, 0, _MAX_MIB),
            cores=r.int_(d, "devcore", where, 0, 100, default=100),
            type=r.str_(d, "type", where, default=""),
            numa=r.int_(d, "numa", where, -1, _MAX_INDEX, default=0),
            healthy=r.bool_(d, "health", where, True),
        ))
    _unique_uuids(r, devices)
    return NodeInventory(devices=tuple(devices), split_count=min(counts) if counts else 10)


def node_inventory(annotations: Mapping[str, str]) -> NodeInventory | None:
    """The node's GPUs from its annotations (ours first, HAMi's otherwise); None = no GPUs."""
    if NODE_GPUS in annotations:
        return decode_node_gpus(annotations[NODE_GPUS])
    if HAMI_NODE_REGISTER in annotations:
        return decode_hami_register(annotations[HAMI_NODE_REGISTER])
    return None


# ---- pod assignment -----------------------------------------------------------------------------

def encode_assignment(assignment: PodAssignment) -> str:
    return json.dumps({
        "version": VERSION,
        "node": assignment.node,
        "containers": [{
            "name": c.name, "init": c.init,
            "devices": [{"uuid": d.uuid, "index": d.index, "memoryMiB": d.memory_mib,
                         "cores": d.cores} for d in c.devices],
            "priority": c.priority, "coresPolicy": c.core_policy,
        } for c in assignment.containers],
        "rule": assignment.rule,
    }, separators=(",", ":"))


def decode_assignment(text: str) -> PodAssignment:
    r = _Reader(ASSIGNMENT)
    doc, items = r.document(text, "containers")
    containers = []
    names: set[str] = set()
    for i, raw in enumerate(items):
        where = f"containers[{i}]"
        c = r.obj(raw, where)
        name = r.str_(c, "name", where)
        if not name or name in names:
            raise r.fail(f"{where}.name", f"{name!r} is empty or listed twice")
        names.add(name)
        policy = r.str_(c, "coresPolicy", where, default="default")
        if policy not in CORE_POLICIES:
            raise r.fail(f"{where}.coresPolicy",
                         f"{policy!r} is not one of {' | '.join(CORE_POLICIES)}")
        devices = []
        for j, rawd in enumerate(r.items(r.field(c, "devices", where), f"{where}.devices")):
            dw = f"{where}.devices[{j}]"
            d = r.obj(rawd, dw)
            devices.append(DeviceGrant(
                uuid=r.str_(d, "uuid", dw),
                index=r.int_(d, "index", dw, 0, _MAX_INDEX),
                memory_mib=r.int_(d, "memoryMiB", dw, 0, _MAX_MIB),
                cores=r.int_(d, "cores", dw, 0, 100),
            ))
        containers.append(ContainerAssignment(
            name=name, devices=tuple(devices), init=r.bool_(c, "init", where, False),
            priority=r.int_(c, "priority", where, 0, 1, default=1),
            core_policy=policy,  # type: ignore[arg-type]  # checked against CORE_POLICIES
        ))
    return PodAssignment(node=r.str_(doc, "node", ""), containers=tuple(containers),
                         rule=r.str_(doc, "rule", "", default=""))


def encode_hami_devices(assignment: PodAssignment) -> str:
    """HAMi's device list: `UUID,NVIDIA,<mem>,<cores>:` per device, `;` after each container."""
    return "".join("".join(f"{d.uuid},NVIDIA,{d.memory_mib},{d.cores}:" for d in c.devices) + ";"
                   for c in assignment.containers if not c.init)


def decode_bind_phase(annotations: Mapping[str, str]) -> BindPhase | None:
    phase = annotations.get(BIND_PHASE)
    if phase is None:
        return None
    if phase not in BIND_PHASES:
        raise AnnotationError(f"annotation {BIND_PHASE}: {phase!r} is not one of "
                              f"{' | '.join(BIND_PHASES)}")
    return phase  # type: ignore[return-value]  # checked against BIND_PHASES


def assignment_annotations(assignment: PodAssignment, phase: BindPhase, now_unix: int,
                           ) -> dict[str, str]:
    """Every annotation the extender writes on a pod at bind, ours and HAMi's mirrors."""
    devices = encode_hami_devices(assignment)
    return {
        ASSIGNMENT: encode_assignment(assignment),
        BIND_PHASE: phase,
        HAMI_VGPU_NODE: assignment.node,
        HAMI_DEVICES_TO_ALLOCATE: devices,
        HAMI_DEVICES_ALLOCATED: devices,
        HAMI_BIND_PHASE: phase,
        HAMI_BIND_TIME: str(now_unix),
    }


def encode_allocated(containers: Sequence[str]) -> str:
    return json.dumps(sorted(set(containers)))


def decode_allocated(text: str) -> tuple[str, ...]:
    r = _Reader(ALLOCATED)
    out = []
    for i, v in enumerate(r.items(r.load(text), "")):
        if not isinstance(v, str):
            raise r.fail(f"[{i}]", f"must be a container name (a string), got {_kind(v)}")
        out.append(v)
    return tuple(out)


# ---- the node's allocation ledger ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Reservation:
    """What one pod holds on the node, per GPU: (uuid, memory MiB, cores, slices)."""

    uid: str
    pod: str  # namespace/name, for people reading the node
    at: int  # unix seconds of the reservation
    gpus: tuple[tuple[str, int, int, int], ...]


@dataclass(frozen=True, slots=True)
class NodeAllocations:
    """The extender's ledger on a Node (`gpuwarden.io/allocations`): every reservation of a pod
    that holds GPUs there. Updated only with the Node's resourceVersion as a precondition, so
    two extender replicas never hand out the same slice."""

    reservations: tuple[Reservation, ...] = ()

    def without(self, uid: str) -> NodeAllocations:
        return NodeAllocations(tuple(r for r in self.reservations if r.uid != uid))

    def with_(self, reservation: Reservation) -> NodeAllocations:
        return NodeAllocations(tuple(sorted((*self.without(reservation.uid).reservations,
                                             reservation), key=lambda r: r.uid)))

    def get(self, uid: str) -> Reservation | None:
        return next((r for r in self.reservations if r.uid == uid), None)


def encode_allocations(allocations: NodeAllocations) -> str:
    return json.dumps({"version": VERSION, "pods": [
        {"uid": r.uid, "pod": r.pod, "at": r.at, "gpus": [list(g) for g in r.gpus]}
        for r in allocations.reservations]}, separators=(",", ":"))


def decode_allocations(text: str) -> NodeAllocations:
    r = _Reader(ALLOCATIONS)
    _, items = r.document(text, "pods")
    out = []
    for i, raw in enumerate(items):
        where = f"pods[{i}]"
        p = r.obj(raw, where)
        gpus = []
        for j, g in enumerate(r.items(r.field(p, "gpus", where), f"{where}.gpus")):
            ok = (isinstance(g, list) and len(g) == 4 and isinstance(g[0], str)
                  and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                          for v in g[1:]))
            if not ok:
                raise r.fail(f"{where}.gpus[{j}]", "must be [uuid, memoryMiB, cores, slices] "
                             "with whole numbers >= 0")
            gpus.append((str(g[0]), int(g[1]), int(g[2]), int(g[3])))  # type: ignore[index]  # `ok`: a 4-list
        out.append(Reservation(uid=r.str_(p, "uid", where), pod=r.str_(p, "pod", where, ""),
                               at=r.int_(p, "at", where, 0, 1 << 40, default=0),
                               gpus=tuple(gpus)))
    return NodeAllocations(tuple(out))
