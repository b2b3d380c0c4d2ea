"""What a container gets: the pod an Allocate is for, its limits, and the env and mounts that
bring libvgpu in. Pure functions over plain data (pods as `PodView`); no gRPC, no API calls.

The kubelet gives Allocate device IDs only. The pod is the one bound to this node whose
assignment (written by the extender) says `allocating` and whose next unallocated container has
as many GPUs as IDs were given: pods whose assigned GPUs are the IDs' GPUs first, then the
longest waiting. A pod without an assignment that asks only for the GPU resource gets slices of
the IDs' GPUs with the configured defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deviceplugin.devices import SEP, PhysicalGpu, gpus_of, parse_slice_id, scaled_mib
from gpuwarden.annotations import (
    ALLOCATED,
    ASSIGNMENT,
    AnnotationError,
    ContainerAssignment,
    DeviceGrant,
    decode_allocated,
    decode_assignment,
    decode_bind_phase,
)
from gpuwarden.config import Settings
from gpuwarden.limit import MemoryLimit, memory_limit_env

__all__ = [
    "CONTAINER_LIB",
    "CONTAINER_NODE_DIR",
    "CONTAINER_REGION",
    "CONTAINER_REGION_DIR",
    "MARKER_ENV",
    "PRELOAD_ANNOTATION",
    "AllocationError",
    "ContainerPlan",
    "ContainerSpec",
    "HostPaths",
    "Match",
    "MountSpec",
    "PodView",
    "container_edits",
    "grant_limits",
    "match_pod",
    "plan_container",
    "preferred",
    "preload_text",
    "region_dir_name",
    "workload_id",
]

# Where things appear inside the container.
CONTAINER_LIB = "/usr/local/gpuwarden/lib/libvgpu.so"
CONTAINER_PRELOAD = "/etc/ld.so.preload"
CONTAINER_REGION_DIR = "/var/lib/gpuwarden/region"
CONTAINER_REGION = f"{CONTAINER_REGION_DIR}/vgpu.region"
CONTAINER_NODE_DIR = "/var/lib/gpuwarden/node"
PRELOAD_ANNOTATION = "gpuwarden.io/preload"  # "false": no ld.so.preload for this pod
MARKER_ENV = "GPUWARDEN_WORKLOAD"  # the agent's workload id, read from a process's environment


class AllocationError(Exception):
    """A request that cannot be answered; the message names the pod (when one is known) and
    why. Nothing has been applied when it is raised."""


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    init: bool = False
    gpus: int = 0  # the GPU resource asked for (limits)
    other_gpu_resources: bool = False  # asks for gpumem / gpucores / ... too
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodView:
    """The parts of a pod the plugin reads (built from the API's object at the edge)."""

    namespace: str
    name: str
    uid: str
    node: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerSpec, ...] = ()  # init containers first, in spec order
    created: float = 0.0  # unix seconds
    phase: str = "Pending"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def allocated(self) -> tuple[str, ...]:
        text = self.annotations.get(ALLOCATED)
        return decode_allocated(text) if text else ()


@dataclass(frozen=True, slots=True)
class Match:
    pod: PodView
    container: ContainerAssignment  # from the assignment, or made from the defaults
    from_assignment: bool


@dataclass(frozen=True, slots=True)
class MountSpec:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class HostPaths:
    libvgpu: str  # host path of libvgpu.so
    preload_file: str  # host path of the generated ld.so.preload
    region_root: str  # per-container folders live under it
    node_dir: str  # host folder of the node region


@dataclass(frozen=True, slots=True)
class ContainerPlan:
    wid: str
    pod: PodView
    container: str
    grants: tuple[DeviceGrant, ...]
    limits: tuple[MemoryLimit, ...]  # per grant
    region_dir: str  # host folder
    envs: Mapping[str, str]
    mounts: tuple[MountSpec, ...]
    priority: int
    core_policy: str


# ---- matching ----------------------------------------------------------------------------------

def _next_container(pod: PodView, containers: Sequence[ContainerAssignment],
                    ) -> ContainerAssignment | None:
    done = set(pod.allocated())
    for c in containers:
        if c.devices and c.name not in done:
            return c
    return None


def _default_grant(pod: PodView, uuids: Sequence[str], gpus: Mapping[str, PhysicalGpu],
                   settings: Settings) -> tuple[ContainerAssignment | None, str]:
    """A pod without an assignment: its next GPU container gets the defaults when it asks
    only for the GPU resource, as many as the IDs; else None and why (or "")."""
    done = set(pod.allocated())
    for c in pod.containers:
        if c.gpus and c.name not in done:
            if c.other_gpu_resources:
                return None, (f"pod {pod.ref} container {c.name!r} asks for GPU memory or "
                              f"cores but has no {ASSIGNMENT} annotation (is it scheduled by "
                              f"the gpuwarden scheduler, {settings.scheduler_name}?)")
            if c.gpus != len(uuids):
                return None, ""
            grants = tuple(DeviceGrant(
                uuid=u, index=gpus[u].index,
                memory_mib=settings.default_mem_mib or scaled_mib(gpus[u], settings),
                cores=settings.default_cores) for u in uuids)
            return ContainerAssignment(name=c.name, devices=grants, init=c.init), ""
    return None, ""


def match_pod(pods: Sequence[PodView], node: str, device_ids: Sequence[str],
              gpus: Mapping[str, PhysicalGpu], settings: Settings) -> Match:
    """The pod and container an Allocate of `device_ids` is for (AllocationError otherwise)."""
    if not device_ids:
        raise AllocationError("the kubelet asked for a container with no device IDs")
    try:
        uuids = gpus_of(device_ids, gpus)
    except ValueError as err:
        raise AllocationError(str(err)) from None
    if len(uuids) != len(device_ids):
        raise AllocationError(f"device IDs {list(device_ids)} put two slices of one GPU in one "
                              "container; a container's slices must be on distinct GPUs")
    n = len(device_ids)
    candidates: list[tuple[tuple[int, float, str], Match]] = []
    notes: list[str] = []
    for pod in pods:
        if pod.node != node or pod.phase not in ("Pending", ""):
            continue
        try:
            if ASSIGNMENT in pod.annotations:
                if decode_bind_phase(pod.annotations) != "allocating":
                    continue
                assignment = decode_assignment(pod.annotations[ASSIGNMENT])
                c = _next_container(pod, assignment.containers)
                if c is None:
                    continue
                if len(c.devices) != n:
                    notes.append(f"pod {pod.ref} is allocating, but its next container "
                                 f"{c.name!r} was assigned {len(c.devices)} GPUs, not {n}")
                    continue
                exact = {d.uuid for d in c.devices} == set(uuids)
                candidates.append(((0 if exact else 1, pod.created, pod.ref),
                                   Match(pod, c, True)))
            else:
                dc, note = _default_grant(pod, uuids, gpus, settings)
                if dc is not None:
                    candidates.append(((2, pod.created, pod.ref), Match(pod, dc, False)))
                elif note:
                    notes.append(note)
        except AnnotationError as err:
            notes.append(f"pod {pod.ref} was skipped: {err}")
    if not candidates:
        why = "; ".join(notes) if notes else "no pod is allocating there"
        raise AllocationError(f"no pod on node {node} waits for {n} GPU slice(s) "
                              f"{list(device_ids)}: {why}")
    candidates.sort(key=lambda c: c[0])
    return candidates[0][1]


# ---- the plan ----------------------------------------------------------------------------------

def workload_id(pod: PodView, container: str) -> str:
    """The agent's id of a pod's container (in cluster mode it finds the region by it)."""
    return region_dir_name(pod.uid, container)


def region_dir_name(pod_uid: str, container: str) -> str:
    return f"{pod_uid}_{container}"


def preload_text() -> str:
    return CONTAINER_LIB + "\n"


def _preload_wanted(pod: PodView, container: str) -> bool:
    if pod.annotations.get(PRELOAD_ANNOTATION, "").strip().lower() == "false":
        return False
    for c in pod.containers:
        if c.name == container and c.env.get("CUDA_DISABLE_CONTROL", "").lower() == "true":
            return False
    return True


def plan_container(match: Match, gpus: Mapping[str, PhysicalGpu], settings: Settings,
                   paths: HostPaths) -> ContainerPlan:
    """The env, mounts and region contents for the matched container."""
    c, pod = match.container, match.pod
    missing = [d.uuid for d in c.devices if d.uuid not in gpus]
    if missing:
        raise AllocationError(f"pod {pod.ref} container {c.name!r} is assigned GPU(s) "
                              f"{', '.join(missing)}, which this node does not have "
                              f"(it has {', '.join(sorted(gpus))})")
    limits = grant_limits(c.devices, gpus, settings)
    region_dir = f"{paths.region_root.rstrip('/')}/{region_dir_name(pod.uid, c.name)}"
    wid = workload_id(pod, c.name)
    policy, envs, mounts = container_edits(c.devices, limits, c.priority, c.core_policy, wid,
                                           region_dir, _preload_wanted(pod, c.name), settings,
                                           paths)
    return ContainerPlan(wid=wid, pod=pod, container=c.name, grants=c.devices,
                         limits=limits, region_dir=region_dir, envs=envs,
                         mounts=mounts, priority=c.priority, core_policy=policy)


def grant_limits(grants: Sequence[DeviceGrant], gpus: Mapping[str, PhysicalGpu],
                 settings: Settings) -> tuple[MemoryLimit, ...]:
    """The memory limit of each grant: its memoryMiB, where the assignment's 0 MiB means the
    whole GPU after scaling (the one place that reads that 0)."""
    return tuple(MemoryLimit.of_mib(d.memory_mib or scaled_mib(gpus[d.uuid], settings))
                 for d in grants)


def container_edits(grants: Sequence[DeviceGrant], limits: Sequence[MemoryLimit], priority: int,
                    core_policy: str, wid: str, region_dir: str, preload: bool,
                    settings: Settings, paths: HostPaths,
                    ) -> tuple[str, dict[str, str], tuple[MountSpec, ...]]:
    """What a container with these grants gets: its core policy, env and mounts (libvgpu, its
    region folder, the node region, ld.so.preload when `preload`, the driver mounts). One
    definition for the device plugin's Allocate and the DRA driver's CDI spec."""
    cores_off = settings.disable_core_limit
    policy = "disable" if cores_off else core_policy
    uuids = ",".join(d.uuid for d in grants)
    envs: dict[str, str] = {
        "NVIDIA_VISIBLE_DEVICES": uuids,
        "CUDA_VISIBLE_DEVICES": uuids,
        "CUDA_DEVICE_MEMORY_SHARED_CACHE": CONTAINER_REGION,
        **memory_limit_env(limits),
        "GPU_CORE_UTILIZATION_POLICY": policy,
        "CUDA_TASK_PRIORITY": str(priority),
        "GPUWARDEN_NODE_REGION": f"{CONTAINER_NODE_DIR}/node.region",
        MARKER_ENV: wid,
    }
    if len(limits) != len(grants):
        raise ValueError(f"container_edits: {len(grants)} grants but {len(limits)} limits")
    for i, d in enumerate(grants):
        if d.cores and not cores_off:
            envs[f"CUDA_DEVICE_SM_LIMIT_{i}"] = str(d.cores)
    if not cores_off and grants[0].cores:
        envs["CUDA_DEVICE_SM_LIMIT"] = str(grants[0].cores)
    mounts = [
        MountSpec(CONTAINER_REGION_DIR, region_dir, False),
        MountSpec(CONTAINER_NODE_DIR, paths.node_dir, False),
        MountSpec(CONTAINER_LIB, paths.libvgpu, True),
    ]
    if preload:
        mounts.append(MountSpec(CONTAINER_PRELOAD, paths.preload_file, True))
    for p in settings.driver_mounts:
        path = p.removesuffix(":rw").removesuffix(":ro")
        mounts.append(MountSpec(path, path, not p.endswith(":rw")))
    return policy, envs, tuple(mounts)


# ---- preferred allocation ----------------------------------------------------------------------

def preferred(available: Sequence[str], must_include: Sequence[str], size: int,
              gpu_order: Sequence[str], policy: str,
              hint: Sequence[str] = ()) -> tuple[str, ...]:
    """`size` IDs from `available`, every one on a distinct GPU, keeping `must_include`.

    GPUs in `hint` (the GPUs assigned to the pod waiting for this size) come first; then
    `binpack` prefers the GPUs with the fewest free slices, `spread` the most; ties by GPU
    order. Fewer than `size` are returned when there are not that many distinct GPUs."""
    free: dict[str, list[str]] = {}
    for d in available:
        free.setdefault(parse_slice_id(d), []).append(d)
    chosen = list(dict.fromkeys(must_include))
    used = {parse_slice_id(d) for d in chosen}
    rank = {u: i for i, u in enumerate(gpu_order)}
    hinted = {u: i for i, u in enumerate(hint)}

    def key(u: str) -> tuple[int, int, int]:
        n = len(free[u])
        return (hinted.get(u, len(hinted)), n if policy == "binpack" else -n,
                rank.get(u, len(rank)))

    for u in sorted(free, key=key):
        if len(chosen) >= size:
            break
        if u not in used:
            chosen.append(sorted(free[u], key=_slice_number)[0])
            used.add(u)
    return tuple(chosen[:max(size, len(must_include))])


def _slice_number(device_id: str) -> int:
    return int(device_id.rpartition(SEP)[2])
