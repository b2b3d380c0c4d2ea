"""The admission webhook's review: policy denials quoted with rule and file:line, privileged GPU
pods refused unless a rule allows them, requests no GPU node can hold refused, defaults and the
scheduler name patched in, the opt-out label honoured; certificates generated and reloaded."""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from extender.certs import ReloadingTls, generate
from extender.server import JsonServer
from extender.webhook import review
from gpuwarden.config import Settings
from gpuwarden.placement import PodPlanner
from policy import load_texts
from policy.compiler import CompiledPolicy

POLICY_TEXT = """version 1
defaults {
  gpu = 1
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
}
rule "trusted" {
  match label "gpuwarden.io/trusted" == "true"
  allow
}
"""


def policy() -> CompiledPolicy:
    r = load_texts([("cluster.gwp", POLICY_TEXT)])
    assert r.policy is not None, r.diagnostics
    return r.policy


def admission(limits: dict[str, int] | None, *, namespace: str = "default",
              labels: dict[str, str] | None = None, privileged: bool = False,
              scheduler: str | None = None, name: str = "p") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "x"}
    if limits is not None:
        container["resources"] = {"limits": {f"nvidia.com/{k}": v for k, v in limits.items()}}
    if privileged:
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {"containers": [container, {"name": "side", "image": "y"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "namespace": namespace, "operation": "CREATE",
        "object": {"metadata": {"name": name, "namespace": namespace,
                                "labels": labels or {}}, "spec": spec}}}


def fits(planner: PodPlanner) -> str | None:
    return None


def run(body: dict[str, Any], capacity: Any = fits, mutate: bool = True) -> dict[str, Any]:
    out = review(body, policy(), Settings(), capacity, mutate)
    assert out["kind"] == "AdmissionReview" and out["response"]["uid"] == "u-1"
    return out["response"]


def patch_of(resp: dict[str, Any]) -> list[dict[str, Any]]:
    assert resp["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(resp["patch"]))


def test_a_denied_pod_is_refused_with_the_rule_and_its_file_line() -> None:
    resp = run(admission({"gpu": 1}, namespace="sandbox"))
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert resp["status"]["message"] == (
        "gpuwarden: pod sandbox/p is denied by policy: container main: sandboxes get no GPU "
        '(policy rule "sandbox", cluster.gwp:9)')


def test_defaults_and_scheduler_name_are_patched_into_the_gpu_container_only() -> None:
    resp = run(admission({"gpucores": 30}, namespace="nb"))
    assert resp["allowed"] is True
    ops = patch_of(resp)
    assert ops[0] == {"op": "add", "path": "/spec/schedulerName",
                      "value": "gpuwarden-scheduler"}
    want = {"nvidia.com/gpucores": 30, "nvidia.com/gpu": "1", "nvidia.com/priority": "1",
            "nvidia.com/gpumem": "4096"}
    assert ops[1] == {"op": "add", "path": "/spec/containers/0/resources",
                      "value": {"limits": want, "requests": {k: v for k, v in want.items()
                                                             if k != "nvidia.com/gpucores"}}}
    assert len(ops) == 2


def test_a_pod_that_names_its_scheduler_and_every_key_gets_no_patch() -> None:
    resp = run(admission({"gpu": 1, "gpumem": 1000, "gpucores": 10, "priority": 0},
                         scheduler="my-scheduler"))
    assert resp == {"uid": "u-1", "allowed": True}


def test_pods_without_gpu_and_opted_out_pods_pass_untouched() -> None:
    assert run(admission(None)) == {"uid": "u-1", "allowed": True}
    assert run(admission({"gpu": 1}, namespace="sandbox",
                         labels={"hami.io/webhook": "ignore"})) == {"uid": "u-1", "allowed": True}


def test_privileged_gpu_container_is_refused_unless_a_rule_allows_it() -> None:
    resp = run(admission({"gpu": 1}, privileged=True))
    assert resp["allowed"] is False
    assert "container main is privileged and asks for a GPU" in resp["status"]["message"]
    assert "rule with `allow`" in resp["status"]["message"]
    resp = run(admission({"gpu": 1}, privileged=True, labels={"gpuwarden.io/trusted": "true"}))
    assert resp["allowed"] is True


def test_a_request_no_node_can_hold_is_refused_with_the_reason() -> None:
    resp = run(admission({"gpu": 1, "gpumem": 200000}),
               capacity=lambda p: "n1: container main needs 1 GPU with 200000MiB")
    assert resp["allowed"] is False
    assert resp["status"]["message"] == (
        "gpuwarden: pod default/p fits no GPU node of the cluster, even empty: "
        "n1: container main needs 1 GPU with 200000MiB")


def test_bad_input_is_named() -> None:
    resp = run(admission({"gpucores": 300}))
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    assert "nvidia.com/gpucores'] = 300: out of range" in resp["status"]["message"]
    bad = review({"kind": "AdmissionReview"}, policy(), Settings(), fits, True)
    assert bad["response"]["status"]["message"] == (
        "the body is not an AdmissionReview: 'request' is missing")


def test_generate_name_pods_are_reviewed_and_validate_never_patches() -> None:
    body = admission({"gpumem": 1000}, name="")
    body["request"]["object"]["metadata"]["generateName"] = "ranker-"
    resp = run(body, mutate=False)
    assert resp == {"uid": "u-1", "allowed": True}


def _peer_cert(port: int, ca: Path) -> bytes:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert tls.recv(4096).startswith(b"HTTP/1.1 200")
        cert = tls.getpeercert(binary_form=True)
        assert cert is not None
        return cert


def test_generated_certificate_serves_tls_and_is_reloaded_when_rotated(tmp_path: Path) -> None:
    first = generate(tmp_path / "a", ["127.0.0.1", "gpuwarden-webhook.kube-system.svc"])
    assert oct(first.key.stat().st_mode & 0o777) == "0o600"
    tls = ReloadingTls(first.cert, first.key)
    assert tls.loads == 1 and not tls.reload()
    srv = JsonServer(("127.0.0.1", 0), {}, lambda: True, CollectorRegistry(),
                     tls=tls.context).start()
    try:
        before = _peer_cert(srv.port, first.ca)
        second = generate(tmp_path / "b", ["127.0.0.1"])
        os.replace(second.cert, first.cert)
        os.replace(second.key, first.key)
        later = time.time() + 5
        os.utime(first.cert, (later, later))
        assert tls.reload() and tls.loads == 2
        after = _peer_cert(srv.port, second.ca)  # new connections get the new certificate
        assert after != before
    finally:
        srv.shutdown()
        srv.server_close()
    bad = tmp_path / "bad.crt"
    bad.write_text("not a certificate")
    try:
        ReloadingTls(bad, first.key)
    except ValueError as err:
        assert str(bad) in str(err)
    else:
        raise AssertionError("a bad certificate file was accepted")
