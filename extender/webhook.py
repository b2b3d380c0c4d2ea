"""The admission webhook (AdmissionReview v1): the policy at `kubectl apply`.

For a pod with GPU containers (and without the opt-out label `hami.io/webhook: ignore`):
- refused, with the policy's message (reason, rule, file:line), when the policy denies it;
- refused when a GPU container is privileged (it would see every GPU and bypass its slice)
  unless a policy rule with `allow` matches it;
- refused when its request fits no GPU node of the cluster even with the node empty;
- mutated (on /mutate): `schedulerName` set to gpuwarden's scheduler, and the resource keys the
  pod left out filled from the policy's effective values (GPU count, memory, cores, priority),
  in limits and requests alike.

`review` is pure over the review, the policy, the settings and a `capacity` callback that
answers for the cluster; the HTTP side is `extender.server.JsonServer` over TLS.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuwarden.annotations import HAMI_WEBHOOK_LABEL
from gpuwarden.config import Settings
from gpuwarden.placement import Denial, PlacementError, PodPlanner, PodRequest
from policy.compiler import CompiledPolicy
from policy.model import EffectiveRule
from policy.pods import PodError, workloads_from_manifest

__all__ = ["Capacity", "review"]

# Given the pod's request (no node), None when some GPU node could hold it, else why not.
Capacity = Callable[[PodPlanner], str | None]


def _response(uid: str, allowed: bool, message: str = "", code: int = 403,
              patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    resp: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed:
        resp["status"] = {"code": code, "message": message, "reason": "Forbidden"
                          if code == 403 else "BadRequest"}
    if patch:
        resp["patchType"] = "JSONPatch"
        resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}


def review(body: Mapping[str, Any], policy: CompiledPolicy, settings: Settings,
           capacity: Capacity, mutate: bool) -> dict[str, Any]:
    request = body.get("request")
    if not isinstance(request, Mapping):
        return _response("", False, "the body is not an AdmissionReview: 'request' is missing",
                         400)
    uid = str(request.get("uid", ""))
    pod = request.get("object")
    if (request.get("kind") or {}).get("kind") != "Pod" or not isinstance(pod, Mapping):
        return _response(uid, True)
    meta = dict(pod.get("metadata") or {})
    if (meta.get("labels") or {}).get(HAMI_WEBHOOK_LABEL) == "ignore":
        return _response(uid, True)
    namespace = str(request.get("namespace") or meta.get("namespace") or "default")
    named = dict(pod)
    named["metadata"] = {**meta, "name": meta.get("name") or meta.get("generateName") or "pod"}
    where = f"pod {namespace}/{named['metadata']['name']}"
    try:
        workloads = workloads_from_manifest(named, where, settings.resource_names,
                                            namespace=namespace)
        planner = PodPlanner(workloads, policy, meta.get("annotations") or {},
                             node_policy=settings.node_scheduler_policy,
                             gpu_policy=settings.gpu_scheduler_policy)
    except (PodError, PlacementError) as err:
        return _response(uid, False, f"gpuwarden: {err}", 400)
    if not planner.wants_gpu:
        return _response(uid, True)
    asked = planner.request()
    if isinstance(asked, Denial):
        return _response(uid, False, f"gpuwarden: {where} is denied by policy: {asked.message}")
    rules = planner.rules()
    for w, rule in rules:
        if _privileged(pod, w.container, w.init) and rule.decided_by.get("denied") is None:
            return _response(uid, False, (
                f"gpuwarden: {where}: container {w.container} is privileged and asks for a GPU; "
                "a privileged container sees every GPU and bypasses its slice. A policy rule "
                "with `allow` that matches it is needed"))
    why = capacity(planner)
    if why is not None:
        return _response(uid, False, f"gpuwarden: {where} fits no GPU node of the cluster, "
                         f"even empty: {why}")
    if not mutate:
        return _response(uid, True)
    return _response(uid, True, patch=_patch(pod, asked, rules, settings))


def _privileged(pod: Mapping[str, Any], container: str, init: bool) -> bool:
    spec = pod.get("spec") or {}
    for c in spec.get("initContainers" if init else "containers") or []:
        if c.get("name") == container:
            return bool((c.get("securityContext") or {}).get("privileged"))
    return False


def _patch(pod: Mapping[str, Any], asked: PodRequest, rules: Sequence[tuple[Any, EffectiveRule]],
           settings: Settings) -> list[dict[str, Any]]:
    spec = pod.get("spec") or {}
    ops: list[dict[str, Any]] = []
    if settings.scheduler_name and spec.get("schedulerName") in (None, "", "default-scheduler"):
        ops.append({"op": "add", "path": "/spec/schedulerName",
                    "value": settings.scheduler_name})
    names = settings.resource_names
    for w, rule in rules:
        section = "initContainers" if w.init else "containers"
        for i, c in enumerate(spec.get(section) or []):
            if c.get("name") != w.container:
                continue
            resources = copy.deepcopy(c.get("resources") or {})
            limits = resources.setdefault("limits", {})
            given = set(limits) | set(resources.get("requests") or {})
            fill = {names.gpu: rule.gpu, names.priority: rule.priority}
            if names.gpumem not in given and names.gpumem_percentage not in given:
                if rule.gpumem_mib is not None:
                    fill[names.gpumem] = rule.gpumem_mib
                elif rule.gpumem_percentage is not None:
                    fill[names.gpumem_percentage] = rule.gpumem_percentage
            if rule.gpucores:
                fill[names.gpucores] = rule.gpucores
            added = {k: str(v) for k, v in fill.items() if k not in given}
            if not added:
                continue
            limits.update(added)
            resources["requests"] = {**(resources.get("requests") or {}), **added}
            ops.append({"op": "add", "path": f"/spec/{section}/{i}/resources",
                        "value": resources})
    return ops
