"""The policy at admission for DRA claims made for a pod: denies refuse the claim with the
policy's message, caps clamp and defaults fill the claim's capacity requests (a JSON patch), a
claim without an owning pod or a gpuwarden request passes unchanged."""

from __future__ import annotations

import base64
import json
from typing import Any

from extender.claims import review_claim
from gpuwarden.config import Settings
from policy import load_texts
from policy.compiler import CompiledPolicy

POLICY = """version 1
defaults {
  gpumem = 5000MiB
  gpucores = 0%
}
rule "sandbox" {
  match namespace == "sandbox"
  deny "sandboxes get no GPU"
}
rule "notebooks" {
  match namespace == "nb"
  default gpumem = 4GiB, gpucores = 20%
  cap gpumem <= 6GiB
}
rule "strict" {
  match namespace == "strict"
  cap gpumem <= 2GiB deny
}
"""


def policy() -> CompiledPolicy:
    r = load_texts([("cluster.gwp", POLICY)])
    assert r.policy is not None, r.diagnostics
    return r.policy


def pod(namespace: str) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": namespace, "uid": "pu"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                     "containers": [{"name": "main", "image": "x",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def review(namespace: str, capacity: dict[str, str] | None, cls: str = "gpu.gpuwarden.io",
           owner: bool = True) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if capacity is not None:
        exactly["capacity"] = {"requests": capacity}
    meta: dict[str, Any] = {"name": "train-gpu-abcde", "namespace": namespace,
                            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "train", "uid": "pu",
                                    "controller": True, "apiVersion": "v1"}]
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    body = {"request": {"uid": "r1", "namespace": namespace, "operation": "CREATE",
                        "kind": {"group": "resource.k8s.io", "version": "v1",
                                 "kind": "ResourceClaim"}, "object": claim}}
    return review_claim(body, policy(), Settings(), lambda ns, name: pod(ns))["response"]


def patch_of(resp: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(resp["patch"])) if "patch" in resp else []


def test_a_denied_namespace_refuses_the_claim_with_the_policy_message() -> None:
    resp = review("sandbox", {"memory": "1Gi"})
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        "gpuwarden: claim sandbox/train-gpu-abcde (pod sandbox/train container main) is denied "
        "by policy: sandboxes get no GPU")


def test_a_deny_cap_refuses_a_claim_above_it() -> None:
    resp = review("strict", {"memory": "3Gi"})
    assert resp["allowed"] is False
    assert resp["status"]["message"].endswith(
        'is denied by policy: requested gpumem 3GiB exceeds the cap 2GiB of rule "strict"')


def test_defaults_fill_and_caps_clamp_the_claims_capacity() -> None:
    resp = review("nb", None)
    assert resp["allowed"] is True
    assert patch_of(resp) == [{"op": "add", "path": "/spec/devices/requests/0/exactly/capacity",
                               "value": {"requests": {"memory": "4096Mi", "cores": "20"}}}]
    resp = review("nb", {"memory": "8Gi", "cores": "10"})
    assert patch_of(resp) == [{"op": "add",
                               "path": "/spec/devices/requests/0/exactly/capacity/requests/memory",
                               "value": "6144Mi"}]


def test_a_claim_within_the_policy_passes_unchanged() -> None:
    resp = review("default", {"memory": "1Gi", "cores": "10"})
    assert resp["allowed"] is True and "patch" not in resp


def test_claims_of_other_classes_or_without_an_owning_pod_are_not_judged() -> None:
    assert review("sandbox", {"memory": "1Gi"}, cls="gpu.nvidia.com")["allowed"] is True
    assert review("sandbox", {"memory": "1Gi"}, owner=False)["allowed"] is True


def test_a_bad_quantity_is_refused_naming_the_field() -> None:
    resp = review("default", {"memory": "lots"})
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    assert "claim default/train-gpu-abcde spec.devices.requests[0].exactly.capacity.requests" \
           ".memory: 'lots' is not a Kubernetes quantity" in resp["status"]["message"]
