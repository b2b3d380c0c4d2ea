"""Pods as the cluster-mode agent sees them: pure functions over the pod JSON the API server
returns (the same dicts a manifest file holds), no client library.

- `pod_containers`: the GPU containers of a pod on this node, each with the policy Workload that
  `gpuwarden policy explain` builds from the same manifest (policy.pods), the devices the
  extender assigned, the region the device plugin prepared and the runtime's container id;
- `pod_event`: the Kubernetes Event (core/v1 body) that tells the pod's owner about a verdict or
  an action, from the agent's audit record;
- `host_pids`: the shim writes pids of the container's PID namespace into the region; the agent
  acts on host pids: the two are matched by the innermost pid and the start time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.cgroups import bare_container_id
from gpuwarden.annotations import ASSIGNMENT, AnnotationError, decode_assignment
from gpuwarden.claims import ClaimRecord
from gpuwarden.resources import ResourceNames
from policy.model import ResourceRequest, Workload
from policy.pods import PodError, workloads_from_manifest

__all__ = [
    "ClaimIndex",
    "PodContainer",
    "PodError",
    "container_region",
    "host_pids",
    "pod_containers",
    "pod_event",
    "split_wid",
    "wid_of",
]

REGION_FILE = "vgpu.region"


@dataclass(frozen=True)
class PodContainer:
    """One GPU container of a pod on this node."""

    wid: str  # "<pod uid>_<container>": the agent's workload id
    pod_uid: str
    workload: Workload  # what the policy matches on (namespace, labels, annotations, node...)
    container_id: str  # the runtime's id while the container runs, else ""
    devices: tuple[str, ...]  # GPU UUIDs the extender assigned (empty: none recorded)
    region: str  # the shared region file the device plugin prepared


def wid_of(pod_uid: str, container: str) -> str:
    return f"{pod_uid}_{container}"


def split_wid(wid: str) -> tuple[str, str]:
    """(pod uid, container) of a cluster workload id; container names have no '_'."""
    uid, _, container = wid.partition("_")
    return uid, container


def container_region(root: str | Path, pod_uid: str, container: str) -> Path:
    """Where the device plugin keeps a container's region on the host."""
    return Path(root) / wid_of(pod_uid, container) / REGION_FILE


def _assigned(annotations: Mapping[str, str], source: str) -> dict[str, tuple[str, ...]]:
    """Container name -> assigned GPU UUIDs, from the extender's assignment annotation."""
    text = annotations.get(ASSIGNMENT)
    if not text:
        return {}
    try:
        assignment = decode_assignment(text)
    except AnnotationError as err:
        raise PodError(f"{source}: {err}") from None
    return {c.name: tuple(d.uuid for d in c.devices) for c in assignment.containers}


def _running_ids(pod: Mapping[str, Any]) -> dict[str, str]:
    status = pod.get("status") or {}
    out: dict[str, str] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or ():
            if (cs.get("state") or {}).get("running") is not None and cs.get("containerID"):
                out[str(cs.get("name"))] = bare_container_id(str(cs["containerID"]))
    return out


# (namespace, ResourceClaim name) -> the claim's prepared units: record and region file
ClaimIndex = Mapping[tuple[str, str], Sequence[tuple[ClaimRecord, str]]]


def _claim_names(pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's claim entries -> the ResourceClaims they name (a template's claim is named in
    the pod's status once made)."""
    out: dict[str, str] = {}
    for rc in (pod.get("spec") or {}).get("resourceClaims") or ():
        if isinstance(rc, dict) and rc.get("resourceClaimName"):
            out[str(rc.get("name"))] = str(rc["resourceClaimName"])
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(st, dict) and st.get("resourceClaimName"):
            out[str(st.get("name"))] = str(st["resourceClaimName"])
    return out


def _claim_unit(raw: Mapping[str, Any], namespace: str, claim_names: Mapping[str, str],
                claims: ClaimIndex) -> tuple[ClaimRecord, str] | None:
    """The first prepared gpuwarden claim unit a container lists in resources.claims."""
    for entry in (raw.get("resources") or {}).get("claims") or ():
        if not isinstance(entry, dict):
            continue
        claim = claim_names.get(str(entry.get("name")))
        for rec, region in claims.get((namespace, claim), ()) if claim else ():
            if not entry.get("request") or entry["request"] == rec.request:
                return rec, region
    return None


def _claim_request(rec: ClaimRecord) -> ResourceRequest:
    first = rec.devices[0]
    return ResourceRequest(gpu=len(rec.devices), gpumem_mib=first.memory_mib,
                           gpucores=first.cores or None, priority=rec.priority)


def pod_containers(pod: Mapping[str, Any], node_labels: Mapping[str, str],
                   regions_root: str | Path,
                   names: ResourceNames | None = None,
                   claims: ClaimIndex | None = None) -> list[PodContainer]:
    """The containers of `pod` that ask for a GPU, through the resource keys or through a
    DRA claim the driver prepared (`claims`: its limits become the container's request);
    raises PodError for a pod it cannot read."""
    meta = pod.get("metadata") or {}
    source = f"pod {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    uid = str(meta.get("uid") or "")
    if not uid:
        raise PodError(f"{source}: metadata.uid is missing")
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return []
    wls = workloads_from_manifest(dict(pod, kind="Pod"), source, names,
                                  node_labels=node_labels, gpu_only=True)
    assigned = _assigned(wls[0].workload.annotations if wls else {}, source)
    running = _running_ids(pod)
    out = [PodContainer(wid=wid_of(uid, pw.container), pod_uid=uid, workload=pw.workload,
                        container_id=running.get(pw.container, ""),
                        devices=assigned.get(pw.container, ()),
                        region=str(container_region(regions_root, uid, pw.container)))
           for pw in wls]
    claim_names = _claim_names(pod) if claims else {}
    if claim_names:
        spec = pod.get("spec") or {}
        raws = {str(c.get("name")): c for key in ("initContainers", "containers")
                for c in spec.get(key) or () if isinstance(c, dict)}
        taken = {pc.workload.container for pc in out}
        for pw in workloads_from_manifest(dict(pod, kind="Pod"), source, names,
                                          node_labels=node_labels):
            unit = (None if pw.container in taken or claims is None else
                    _claim_unit(raws.get(pw.container, {}), pw.workload.namespace,
                                claim_names, claims))
            if unit is not None:
                rec, region = unit
                out.append(PodContainer(
                    wid=wid_of(uid, pw.container), pod_uid=uid,
                    workload=replace(pw.workload, request=_claim_request(rec)),
                    container_id=running.get(pw.container, ""),
                    devices=tuple(d.uuid for d in rec.devices), region=region))
    return out


# ---- Events on the pod ----------------------------------------------------------------------

_REASONS = {
    "alert": ("Warning", "GpuSliceViolation"),
    "terminate": ("Warning", "GpuwardenTerminated"),
    "kill": ("Warning", "GpuwardenKilled"),
    "kernel_kill": ("Warning", "GpuwardenKilled"),
    "would_terminate": ("Warning", "GpuwardenWouldTerminate"),
    "would_kill": ("Warning", "GpuwardenWouldKill"),
}
MESSAGE_LIMIT = 1024  # the API server refuses longer event messages


def _mib(value: Any) -> str:
    return f"{value / (1 << 20):.0f} MiB" if isinstance(value, int | float) else str(value)


def _limits(per_gpu: Mapping[str, Any]) -> str:
    """A record's limits by GPU: `500 MiB`, or `500 MiB on GPU-a, none on GPU-b`."""
    shown = {g: _mib(b) if b is not None else "none" for g, b in sorted(per_gpu.items())}
    if len(set(shown.values())) <= 1:
        return next(iter(shown.values()), "none")
    return ", ".join(f"{text} on {g}" for g, text in shown.items())


def _message(rec: Mapping[str, Any]) -> str:
    wl = rec.get("workload") or {}
    parts = [f"container {wl.get('container', '?')}"]
    if rec.get("verdict"):
        parts.append(f"{rec['verdict']} violation on {rec.get('gpu_uuid', '?')}")
    if rec.get("rule"):
        parts.append(f"rule {rec['rule']}")
    ratio = rec.get("verdict") == "compute"
    evidence = rec.get("evidence") or {}
    if evidence:
        parts.append("measured " + ", ".join(
            f"{k} {v:.2f}" if k.endswith("ratio") else f"{k} {_mib(v)}"
            for k, v in evidence.items() if v is not None))
    if rec.get("limit") is not None:
        parts.append(f"limit {rec['limit']:.2f}" if ratio else f"limit {_mib(rec['limit'])}")
    if rec.get("action") == "kernel_kill":
        parts.append(f"killed in the kernel inside {rec.get('call', 'a driver call')} of "
                     f"{_mib(rec.get('bytes', 0))} over its limit "
                     f"{_mib(rec.get('limit_bytes') or 0)}")
    if rec.get("pids"):
        parts.append("pids " + " ".join(str(p) for p in rec["pids"]))
    if rec.get("detail"):
        parts.append(str(rec["detail"]))
    if rec.get("reason"):
        parts.append(str(rec["reason"]))
    return "; ".join(parts)[:MESSAGE_LIMIT]


def pod_event(rec: Mapping[str, Any], pods: Mapping[str, tuple[str, str]],
              node: str) -> dict[str, Any] | None:
    """A core/v1 Event body for an audit record about a pod's container (a violation, an action
    or a rule change), None for other records. `pods` maps pod uid -> (namespace, name)."""
    kind = rec.get("event")
    if kind in ("violation", "action"):
        action = str(rec.get("action", ""))
        if action not in _REASONS:
            return None
        etype, reason = _REASONS[action]
        message = _message(rec)
    elif kind == "rule_changed":
        etype, reason = "Normal", "GpuwardenRuleChanged"
        message = (f"container {(rec.get('workload') or {}).get('container', '?')}: the policy "
                   f"changed; rule {rec.get('rule')}, memory limit "
                   f"{_limits(rec.get('limits_bytes') or {})}")
    else:
        return None
    uid, _container = split_wid(str((rec.get("workload") or {}).get("id", "")))
    if uid not in pods:
        return None
    namespace, name = pods[uid]
    ts = _rfc3339(float(rec.get("ts", 0.0)))
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{name}.gpuwarden-", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name,
                           "namespace": namespace, "uid": uid},
        "reason": reason, "message": message, "type": etype, "count": 1,
        "firstTimestamp": ts, "lastTimestamp": ts,
        "source": {"component": "gpuwarden-agent", "host": node},
        "reportingComponent": "gpuwarden.io/agent", "reportingInstance": node,
    }


def _rfc3339(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


# ---- PID namespaces -------------------------------------------------------------------------

def host_pids(region_procs: Mapping[int, int],
              candidates: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """The host pids of the region's processes: `region_procs` maps the pid the shim saw
    (its own namespace) to its start time; `candidates` maps host pids of the container to
    (innermost namespace pid, start time). Returns host pid -> start time."""
    by_ns = {(ns, st): host for host, (ns, st) in candidates.items()}
    return {by_ns[(p, st)]: st for p, st in region_procs.items() if (p, st) in by_ns}
