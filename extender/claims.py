"""The policy at admission for DRA claims (AdmissionReview v1 of a ResourceClaim CREATE).

A claim made for a pod (from a ResourceClaimTemplate: the controller-manager creates it with the
pod as its controlling owner) is judged as the pod's containers that use it would be if they
had asked through the resource keys: each gpuwarden request of the claim (a request whose
DeviceClass is named `*.gpuwarden.io`) becomes the containers' request (GPU count, memory MiB,
cores), the policy is evaluated for each container, and
- a deny (a rule's deny, or a cap with `deny`) refuses the claim with the policy's message;
- otherwise the claim's `capacity.requests` are set to the effective memory and cores (the
  policy's defaults where the claim gave none, its clamping caps), so that what the scheduler
  reserves is what libvgpu and the agent will enforce.
A claim with no owning pod, or without a gpuwarden request, is allowed unchanged.

`review_claim` is pure over the review, the policy, the settings and a `read_pod` callback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from extender.webhook import _response
from gpuwarden.config import Settings
from gpuwarden.quantity import QuantityError, parse_quantity
from policy.compiler import CompiledPolicy
from policy.model import ResourceRequest
from policy.pods import PodError, workloads_from_manifest
from policy.units import MIB

__all__ = ["CLASS_SUFFIX", "POD_CLAIM_ANNOTATION", "ReadPod", "review_claim"]

CLASS_SUFFIX = ".gpuwarden.io"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

# (namespace, name) -> the pod as the API returns it, None when it does not exist
ReadPod = Callable[[str, str], Mapping[str, Any] | None]


def _owner_pod(claim: Mapping[str, Any]) -> str | None:
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("controller"):
            return str(ref.get("name"))
    return None


def _asks(claim: Mapping[str, Any], where: str,
          ) -> list[tuple[int, int, int | None, int | None]]:
    """(index, GPU count, memory MiB or None, cores or None) of each gpuwarden request."""
    out = []
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ()
    for i, r in enumerate(requests):
        exactly = r.get("exactly") if isinstance(r, Mapping) else None
        if not isinstance(exactly, Mapping) or \
                not str(exactly.get("deviceClassName", "")).endswith(CLASS_SUFFIX):
            continue
        at = f"{where} spec.devices.requests[{i}].exactly"
        asked = (exactly.get("capacity") or {}).get("requests") or {}
        mem = asked.get("memory")
        cores = asked.get("cores")
        mib = parse_quantity(mem, f"{at}.capacity.requests.memory") if mem is not None else None
        pct = parse_quantity(cores, f"{at}.capacity.requests.cores") if cores is not None \
            else None
        count = exactly.get("count", 1)
        if exactly.get("allocationMode", "ExactCount") != "ExactCount" or \
                not isinstance(count, int) or count < 1:
            raise QuantityError(f"{at}: gpuwarden claims ask for an exact count of GPUs "
                                "(allocationMode ExactCount, count >= 1)")
        out.append((i, count, -(-int(mib) // MIB) if mib is not None else None,
                    int(pct) if pct is not None else None))
    return out


def review_claim(body: Mapping[str, Any], policy: CompiledPolicy, settings: Settings,
                 read_pod: ReadPod) -> dict[str, Any]:
    request = body.get("request") or {}
    uid = str(request.get("uid", ""))
    claim = request.get("object")
    if not isinstance(claim, Mapping):
        return _response(uid, True)
    meta = claim.get("metadata") or {}
    namespace = str(request.get("namespace") or meta.get("namespace") or "default")
    where = f"claim {namespace}/{meta.get('name') or meta.get('generateName') or '?'}"
    try:
        asks = _asks(claim, where)
    except QuantityError as err:
        return _response(uid, False, f"gpuwarden: {err}", 400)
    owner = _owner_pod(claim)
    if not asks or owner is None:
        return _response(uid, True)
    try:
        pod = read_pod(namespace, owner)
    except Exception as err:
        return _response(uid, False, f"gpuwarden: {where}: cannot read its pod "
                         f"{namespace}/{owner} to check it against the policy: {err}", 500)
    if pod is None:
        return _response(uid, True)  # the pod is gone: the claim will be deleted with it
    entry = (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
    users = {str(c.get("name")) for key in ("initContainers", "containers")
             for c in (pod.get("spec") or {}).get(key) or () if isinstance(c, Mapping)
             and any(isinstance(e, Mapping) and e.get("name") == entry
                     for e in (c.get("resources") or {}).get("claims") or ())}
    try:
        workloads = [pw.workload for pw in workloads_from_manifest(
            dict(pod, kind="Pod"), f"pod {namespace}/{owner}", settings.resource_names,
            namespace=namespace) if pw.container in users]
    except PodError as err:
        return _response(uid, False, f"gpuwarden: {where}: {err}", 400)
    patch: list[dict[str, Any]] = []
    for i, count, mib, cores in asks:
        want_mib, want_cores = mib, cores
        for w in workloads:
            rule = policy.evaluate(replace(w, request=ResourceRequest(
                gpu=count, gpumem_mib=mib, gpucores=cores)))
            if rule.denied is not None:
                return _response(uid, False, f"gpuwarden: {where} (pod {namespace}/{owner} "
                                 f"container {w.container}) is denied by policy: "
                                 f"{rule.denied}")
            if rule.gpumem_mib is not None:
                want_mib = rule.gpumem_mib if want_mib is None else min(want_mib,
                                                                        rule.gpumem_mib)
            want_cores = rule.gpucores if want_cores is None else min(want_cores, rule.gpucores)
        if want_mib == mib and want_cores == cores:
            continue
        base = f"/spec/devices/requests/{i}/exactly/capacity"
        exactly = claim["spec"]["devices"]["requests"][i]["exactly"]
        values = {k: v for k, v in (("memory", f"{want_mib}Mi" if want_mib is not None
                                     else None),
                                    ("cores", str(want_cores) if want_cores is not None
                                     else None)) if v is not None}
        if "capacity" not in exactly:
            patch.append({"op": "add", "path": base, "value": {"requests": values}})
        elif "requests" not in (exactly.get("capacity") or {}):
            patch.append({"op": "add", "path": f"{base}/requests", "value": values})
        else:
            old = {"memory": f"{mib}Mi" if mib is not None else None,
                   "cores": str(cores) if cores is not None else None}
            patch += [{"op": "add", "path": f"{base}/requests/{k}", "value": v}
                      for k, v in values.items() if old[k] != v]
    return _response(uid, True, patch=patch or None)
