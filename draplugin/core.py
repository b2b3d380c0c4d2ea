"""The DRA driver's pure core: the node's ResourceSlice from its GPUs, and what a prepared claim
gets (region contents, env, mounts, a CDI spec) from the claim's allocation. Plain data in and
out (API objects as the JSON dicts the API server sends); no gRPC, Kubernetes client or files.

Each GPU is one device with `allowMultipleAllocations: true` and two consumable capacities:
`memory` (bytes, after deviceMemoryScaling) and `cores` (percent of the GPU's compute). The
scheduler keeps the sums; a claim's allocation result carries its `consumedCapacity`, which
becomes the limits libvgpu enforces. One claim request is one "unit": one region folder, one
CDI device, the limits of each of its GPUs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from deviceplugin.allocation import HostPaths, MountSpec, container_edits
from deviceplugin.devices import PhysicalGpu, scaled_mib
from gpuwarden.annotations import DeviceGrant
from gpuwarden.claims import ClaimDevice, ClaimRecord
from gpuwarden.config import Settings
from gpuwarden.limit import MemoryLimit
from gpuwarden.quantity import QuantityError, parse_quantity
from policy.units import MIB

__all__ = [
    "CDI_CLASS",
    "CDI_VERSION",
    "CONFIG_API_VERSION",
    "CONFIG_KIND",
    "DRIVER",
    "ClaimError",
    "ClaimPlan",
    "Share",
    "UnitPlan",
    "cdi_spec",
    "claim_record",
    "device_name",
    "plan_claim",
    "resource_slice",
    "same_devices",
    "shares_of",
    "slice_devices",
]

DRIVER = "gpuwarden.io"
CDI_CLASS = "claim"  # CDI ids are "gpuwarden.io/claim=<claim uid>-<request>"
CDI_VERSION = "0.6.0"
CONFIG_API_VERSION = "gpuwarden.io/v1"
CONFIG_KIND = "GpuConfig"


class ClaimError(ValueError):
    """A claim that cannot be prepared on this node; the message names the claim and why."""


def _quantity(text: Any, where: str) -> Fraction:
    try:
        return parse_quantity(text, where)
    except QuantityError as err:
        raise ClaimError(str(err)) from None


# ---- the ResourceSlice -------------------------------------------------------------------------

def device_name(gpu: PhysicalGpu) -> str:
    return f"gpu-{gpu.index}"


def _policy(default: int, unit: str, step: int) -> dict[str, Any]:
    return {"default": f"{default}{unit}", "validRange": {"min": f"{step}{unit}" if step else "0",
                                                          "step": f"{step or 1}{unit}"}}


def slice_devices(gpus: Sequence[PhysicalGpu], settings: Settings) -> list[dict[str, Any]]:
    """One device per GPU: its attributes (CEL selectors read them as
    device.attributes["gpuwarden.io"].model ...) and its shareable capacities. A claim that
    does not say how much memory it wants gets defaultMem (the whole GPU when 0); cores
    default to defaultCores (0: no compute limit, nothing consumed)."""
    out = []
    for g in sorted(gpus, key=lambda g: g.index):
        mib = scaled_mib(g, settings)
        mem_default = min(settings.default_mem_mib, mib) if settings.default_mem_mib else mib
        out.append({
            "name": device_name(g),
            "allowMultipleAllocations": True,
            "attributes": {
                "model": {"string": g.name or "unknown"},
                "uuid": {"string": g.uuid},
                "index": {"int": g.index},
                "numa": {"int": g.numa},
                "healthy": {"bool": g.healthy},
            },
            "capacity": {
                "memory": {"value": f"{mib}Mi", "requestPolicy": _policy(mem_default, "Mi", 1)},
                "cores": {"value": "100",
                          "requestPolicy": _policy(settings.default_cores, "", 0)},
            },
        })
    return out


def resource_slice(node: str, gpus: Sequence[PhysicalGpu], settings: Settings,
                   generation: int, driver: str = DRIVER) -> dict[str, Any]:
    """The node's one ResourceSlice (its pool is named after the node)."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                 "devices": slice_devices(gpus, settings)},
    }


def _canonical(value: Any, key: str = "") -> Any:
    """Devices with every capacity quantity as a number: the API server writes quantities back
    in canonical form ("8192Mi" comes back as "8Gi")."""
    if isinstance(value, Mapping):
        return {k: _canonical(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v, key) for v in value]
    if isinstance(value, str) and key in ("value", "default", "min", "max", "step"):
        try:
            return parse_quantity(value, key)
        except QuantityError:
            return value
    return value


def same_devices(have: Any, want: Any) -> bool:
    """Whether a slice's devices as the API server returns them are `want`'s."""
    return bool(_canonical(have) == _canonical(want))


# ---- a claim's allocation ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Share:
    """One allocation result of ours: a share of device `device` for request `request`."""

    request: str
    pool: str
    device: str
    share_id: str
    memory_bytes: int | None  # None: no consumedCapacity (the whole GPU)
    cores: int


@dataclass(frozen=True, slots=True)
class _Config:
    priority: int = 1
    core_policy: str = "default"


_PRIORITIES = {"high": 0, "low": 1, 0: 0, 1: 1, "0": 0, "1": 1}
_CORE_POLICIES = ("default", "force", "disable")


def _config(params: Any, where: str, base: _Config) -> _Config:
    if not isinstance(params, Mapping):
        raise ClaimError(f"{where}: expected an object with apiVersion {CONFIG_API_VERSION}, "
                         f"kind {CONFIG_KIND}, and priority / corePolicy")
    if params.get("apiVersion") != CONFIG_API_VERSION or params.get("kind") != CONFIG_KIND:
        raise ClaimError(f"{where}: apiVersion/kind {params.get('apiVersion')!r}/"
                         f"{params.get('kind')!r}; use {CONFIG_API_VERSION}/{CONFIG_KIND}")
    priority, policy = base.priority, base.core_policy
    for key, value in params.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "priority":
            if isinstance(value, bool) or value not in _PRIORITIES:
                raise ClaimError(f"{where}.priority: {value!r} is not valid; use high or low "
                                 "(0 or 1)")
            priority = _PRIORITIES[value]
        elif key == "corePolicy":
            if value not in _CORE_POLICIES:
                raise ClaimError(f"{where}.corePolicy: {value!r} is not valid; use one of "
                                 f"{', '.join(_CORE_POLICIES)}")
            policy = str(value)
        else:
            raise ClaimError(f"{where}: unknown key {key!r}; valid keys: apiVersion, kind, "
                             "priority, corePolicy")
    return _Config(priority, policy)


def _claim_ref(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"claim {meta.get('namespace', '?')}/{meta.get('name', '?')}"


def shares_of(claim: Mapping[str, Any], driver: str = DRIVER,
              ) -> tuple[tuple[Share, ...], dict[str, _Config]]:
    """Our allocation results of a ResourceClaim and the configuration of each request (the
    class's, then the claim's, later entries overriding earlier ones)."""
    ref = _claim_ref(claim)
    alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices")
    if not alloc:
        raise ClaimError(f"{ref} is not allocated (no status.allocation.devices)")
    shares = []
    for i, r in enumerate(alloc.get("results") or []):
        if r.get("driver") != driver:
            continue
        where = f"{ref} status.allocation.devices.results[{i}]"
        used = r.get("consumedCapacity") or {}
        mem = used.get("memory")
        memory = (int(_quantity(mem, f"{where}.consumedCapacity.memory"))
                  if mem is not None else None)
        cores = int(_quantity(used.get("cores", 0), f"{where}.consumedCapacity.cores"))
        if not 0 <= cores <= 100:
            raise ClaimError(f"{where}.consumedCapacity.cores: {cores} is out of range 0..100")
        shares.append(Share(request=str(r.get("request", "")), pool=str(r.get("pool", "")),
                            device=str(r.get("device", "")), share_id=str(r.get("shareID", "")),
                            memory_bytes=memory, cores=cores))
    if not shares:
        raise ClaimError(f"{ref} has no device of driver {driver} in its allocation")
    configs: dict[str, _Config] = {}
    entries = alloc.get("config") or []
    ordered = ([e for e in entries if e.get("source") == "FromClass"]
               + [e for e in entries if e.get("source") != "FromClass"])
    for i, e in enumerate(ordered):
        opaque = e.get("opaque") or {}
        if opaque.get("driver") != driver:
            continue
        where = f"{ref} config from {e.get('source', '?')} [{i}].opaque.parameters"
        targets = e.get("requests") or sorted({s.request for s in shares})
        for req in targets:
            configs[req] = _config(opaque.get("parameters"), where, configs.get(req, _Config()))
    return tuple(shares), configs


# ---- the plan of a claim -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class UnitPlan:
    """One request of a claim: its GPUs, limits, region folder, and what its containers get."""

    request: str
    wid: str  # the workload id, also the region folder's and the CDI device's name
    shares: tuple[Share, ...]
    grants: tuple[DeviceGrant, ...]
    limits: tuple[MemoryLimit, ...]
    region_dir: str
    envs: Mapping[str, str]
    mounts: tuple[MountSpec, ...]
    priority: int
    core_policy: str

    @property
    def cdi_id(self) -> str:
        return f"{DRIVER}/{CDI_CLASS}={self.wid}"


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    namespace: str
    name: str
    uid: str
    units: tuple[UnitPlan, ...]

    @property
    def ref(self) -> str:
        return f"claim {self.namespace}/{self.name}"


def unit_id(claim_uid: str, request: str) -> str:
    """A name safe for folders and CDI device names (a subrequest "a/b" becomes "a.b")."""
    return f"{claim_uid}_{re.sub(r'[^A-Za-z0-9_.-]', '.', request)}"


def plan_claim(claim: Mapping[str, Any], node: str, gpus: Sequence[PhysicalGpu],
               settings: Settings, paths: HostPaths, driver: str = DRIVER) -> ClaimPlan:
    """What preparing `claim` (a ResourceClaim as the API gives it) sets up on `node`."""
    meta = claim.get("metadata") or {}
    ref = _claim_ref(claim)
    shares, configs = shares_of(claim, driver)
    by_name = {device_name(g): g for g in gpus}
    units = []
    for request in dict.fromkeys(s.request for s in shares):
        mine = tuple(s for s in shares if s.request == request)
        grants: list[DeviceGrant] = []
        limits: list[MemoryLimit] = []
        for s in mine:
            if s.pool != node:
                raise ClaimError(f"{ref} request {request!r} was given device {s.device} of "
                                 f"pool {s.pool!r}, not of this node {node!r}")
            g = by_name.get(s.device)
            if g is None:
                raise ClaimError(f"{ref} request {request!r} was given device {s.device}, which "
                                 f"node {node} does not have (it has "
                                 f"{', '.join(sorted(by_name)) or 'no GPU'})")
            if not g.healthy:
                raise ClaimError(f"{ref} request {request!r}: device {s.device} ({g.uuid}) is "
                                 f"unhealthy: {g.why_unhealthy or 'unknown reason'}")
            limit = s.memory_bytes if s.memory_bytes is not None else scaled_mib(g, settings) * MIB
            grants.append(DeviceGrant(uuid=g.uuid, index=g.index, memory_mib=limit // MIB,
                                      cores=s.cores))
            limits.append(MemoryLimit(limit))
        if len({g.uuid for g in grants}) != len(grants):
            raise ClaimError(f"{ref} request {request!r} holds two shares of one GPU; a request's "
                             "devices must be distinct GPUs")
        cfg = configs.get(request, _Config())
        wid = unit_id(str(meta.get("uid", "")), request)
        region_dir = f"{paths.region_root.rstrip('/')}/{wid}"
        policy, envs, mounts = container_edits(grants, limits, cfg.priority, cfg.core_policy,
                                               wid, region_dir, True, settings, paths)
        units.append(UnitPlan(request=request, wid=wid, shares=mine, grants=tuple(grants),
                              limits=tuple(limits), region_dir=region_dir, envs=envs,
                              mounts=mounts, priority=cfg.priority, core_policy=policy))
    return ClaimPlan(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                     uid=str(meta.get("uid", "")), units=tuple(units))


def claim_record(plan: ClaimPlan, unit: UnitPlan) -> ClaimRecord:
    """What the agent reads from the unit's folder: whose claim, which request, its limits."""
    return ClaimRecord(namespace=plan.namespace, name=plan.name, uid=plan.uid,
                       request=unit.request,
                       devices=tuple(ClaimDevice(g.uuid, g.index, g.memory_mib, g.cores)
                                     for g in unit.grants),
                       priority=unit.priority, core_policy=unit.core_policy)


def cdi_spec(plan: ClaimPlan) -> dict[str, Any]:
    """The CDI spec file's content: one device per unit, its env and bind mounts."""
    devices = []
    for u in plan.units:
        devices.append({"name": u.wid, "containerEdits": {
            "env": [f"{k}={v}" for k, v in sorted(u.envs.items())],
            "mounts": [{"hostPath": m.host_path, "containerPath": m.container_path,
                        "type": "bind",
                        "options": ["ro" if m.read_only else "rw", "nosuid", "nodev", "rbind"]}
                       for m in u.mounts]}})
    return {"cdiVersion": CDI_VERSION, "kind": f"{DRIVER}/{CDI_CLASS}", "devices": devices}


def cdi_text(plan: ClaimPlan) -> str:
    return json.dumps(cdi_spec(plan), indent=1, sort_keys=True) + "\n"
