"""Pod manifests (already-parsed YAML/JSON dicts) -> one `Workload` per container.

Reads what `kubectl apply` would get: metadata.namespace/name/labels/annotations, spec.nodeName
and each container's resources.limits (falling back to resources.requests) for the gpuwarden
resource names.  Workload controllers (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob) are read through their pod template.  No YAML here: the CLI parses files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuwarden.quantity import QuantityError, parse_quantity
from gpuwarden.resources import ResourceNames
from policy.model import ResourceRequest, Workload

__all__ = ["PodError", "PodWorkload", "workloads_from_manifest"]

_TEMPLATED = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job",
              "ReplicationController")


class PodError(ValueError):
    """A manifest that cannot be read as a pod; the message names the source and the place."""


@dataclass(frozen=True, slots=True)
class PodWorkload:
    container: str
    init: bool
    workload: Workload
    uses_gpu: bool  # asks for at least one gpuwarden resource (and not nvidia.com/gpu: 0)


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _str_map(value: object, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in _mapping(value, where).items():
        if not isinstance(k, str) or not isinstance(v, str | int | float | bool):
            raise PodError(f"{where}: entry {k!r} must map a string to a string")
        out[k] = v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    return out


# The API server stores whole-number quantities in canonical form with decimal suffixes (30000 is
# read back as "30k", 2000000 as "2M"); binary suffixes (3Gi) are refused for these counts: a
# gpumem of "3Gi" would mean 3 * 2^30 MiB, never what was meant.  (gpuwarden.quantity bounds
# exponents to two digits: "1e99999999" would take minutes to expand exactly.)
_NOT_A_COUNT_SUFFIX = re.compile(r"(?:[KMGTPE]i|[num])$")  # binary, or below one (2000m)


def _quantity(text: str) -> int | None:
    """A decimal Kubernetes quantity that is a whole, non-negative number ("30k", "1e3", "40"),
    else None (gpuwarden.quantity reads it)."""
    if _NOT_A_COUNT_SUFFIX.search(text.strip()):
        return None
    try:
        value = parse_quantity(text, "")
    except QuantityError:
        return None
    return int(value) if value.denominator == 1 and value >= 0 else None


def _int(value: object, where: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool):
        raise PodError(f"{where} = {value!r}: {what}")
    got = value if isinstance(value, int) else _quantity(value) if isinstance(value, str) else None
    if got is None:
        raise PodError(f"{where} = {value!r}: {what}")
    n = got
    if not low <= n <= high:
        raise PodError(f"{where} = {n}: out of range; {what}")
    return n


def _request(resources: Mapping[str, object], names: ResourceNames, where: str) -> ResourceRequest:
    limits = _mapping(resources.get("limits"), f"{where}.resources.limits")
    requests = _mapping(resources.get("requests"), f"{where}.resources.requests")

    def get(name: str) -> tuple[object, str] | None:
        for section, values in (("limits", limits), ("requests", requests)):
            if name in values:
                return values[name], f"{where}.resources.{section}[{name!r}]"
        return None

    out: dict[str, int | None] = {}
    spec = (
        ("gpu", names.gpu, 0, 64, "must be a whole number of GPUs, 0..64"),
        ("gpumem_mib", names.gpumem, 1, 1 << 30, "must be a whole number of MiB (e.g. 3000)"),
        ("gpumem_percentage", names.gpumem_percentage, 1, 100, "must be a percentage 1..100"),
        ("gpucores", names.gpucores, 0, 100, "must be a percentage 0..100"),
        ("priority", names.priority, 0, 1, "must be 0 (high) or 1 (low)"),
    )
    for attr, name, low, high, what in spec:
        found = get(name)
        out[attr] = None if found is None else _int(found[0], found[1], low, high, what)
    # gpu stays None when only memory/cores are asked: the policy's defaults decide the count.
    return ResourceRequest(**out)


def _uses_gpu(req: ResourceRequest) -> bool:
    return any(v is not None for v in (req.gpu, req.gpumem_mib, req.gpumem_percentage,
                                       req.gpucores, req.priority)) and req.gpu != 0


def workloads_from_manifest(
    manifest: object,
    source: str,
    names: ResourceNames | None = None,
    *,
    namespace: str | None = None,
    node_labels: Mapping[str, str] | None = None,
    gpu_only: bool = False,
) -> list[PodWorkload]:
    """One `PodWorkload` per container (init containers included, marked).

    `namespace` overrides metadata.namespace (like `kubectl apply -n`); `gpu_only` skips
    containers that ask for no GPU resource.
    """
    names = names or ResourceNames()
    doc = _mapping(manifest, source)
    kind = doc.get("kind", "Pod")
    if not isinstance(kind, str):
        raise PodError(f"{source}: kind must be a string")
    meta = _mapping(doc.get("metadata"), f"{source}: metadata")
    name = meta.get("name", "")
    if not isinstance(name, str) or not name:
        raise PodError(f"{source}: metadata.name is missing (a pod needs a name)")
    ns = namespace or meta.get("namespace") or "default"
    if not isinstance(ns, str):
        raise PodError(f"{source}: metadata.namespace must be a string")
    spec = _mapping(doc.get("spec"), f"{source}: spec")
    labels = _str_map(meta.get("labels"), f"{source}: metadata.labels")
    annotations = _str_map(meta.get("annotations"), f"{source}: metadata.annotations")
    prefix = "spec"
    if kind in (*_TEMPLATED, "CronJob"):
        if kind == "CronJob":
            job = _mapping(spec.get("jobTemplate"), f"{source}: spec.jobTemplate")
            spec = _mapping(job.get("spec"), f"{source}: spec.jobTemplate.spec")
            prefix = "spec.jobTemplate.spec"
        template = _mapping(spec.get("template"), f"{source}: {prefix}.template")
        tmeta = _mapping(template.get("metadata"), f"{source}: {prefix}.template.metadata")
        labels = _str_map(tmeta.get("labels"), f"{source}: {prefix}.template.metadata.labels")
        annotations = _str_map(tmeta.get("annotations"),
                               f"{source}: {prefix}.template.metadata.annotations")
        prefix += ".template.spec"
        spec = _mapping(template.get("spec"), f"{source}: {prefix}")
    elif kind != "Pod":
        raise PodError(f"{source}: kind {kind!r} is not a pod or a workload with a pod template "
                       "(Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob)")
    node = spec.get("nodeName", "") or ""
    if not isinstance(node, str):
        raise PodError(f"{source}: {prefix}.nodeName must be a string")
    out: list[PodWorkload] = []
    for section, init in (("initContainers", True), ("containers", False)):
        items = spec.get(section) or []
        if not isinstance(items, list):
            raise PodError(f"{source}: {prefix}.{section} must be a list")
        for i, c in enumerate(items):
            where = f"{source}: {prefix}.{section}[{i}]"
            cmap = _mapping(c, where)
            cname = cmap.get("name")
            if not isinstance(cname, str) or not cname:
                raise PodError(f"{where}.name is missing")
            where = f'{source}: container "{cname}"'
            req = _request(_mapping(cmap.get("resources"), f"{where}.resources"), names, where)
            if gpu_only and not _uses_gpu(req):
                continue
            w = Workload(namespace=ns, name=name, labels=labels, annotations=annotations,
                         container=cname, node=node, node_labels=dict(node_labels or {}),
                         request=req)
            out.append(PodWorkload(cname, init, w, _uses_gpu(req)))
    if not out and not gpu_only:
        raise PodError(f"{source}: {prefix}.containers is empty")
    return out
