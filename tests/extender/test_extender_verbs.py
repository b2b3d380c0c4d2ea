"""The extender's verbs over a fake API server: filter explains every rejected node, bind is
reserve -> annotate -> bind with the ledger guarded by resourceVersion (two replicas never
over-commit a GPU), a failed bind releases at once, a deleted pod frees its slice."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from fakecluster import FakeCluster

from extender.server import JsonServer
from extender.service import Extender
from gpuwarden.annotations import (
    ALLOCATIONS,
    ASSIGNMENT,
    BIND_PHASE,
    HAMI_DEVICES_TO_ALLOCATE,
    decode_allocations,
    decode_assignment,
)
from gpuwarden.config import Settings
from policy import load_texts
from policy.compiler import CompiledPolicy

GIB = 1024
POLICY_TEXT = """version 1
defaults {
  gpumem = 5000MiB
}
rule "sandbox" {
  match namespace == "sandbox"
  deny "sandboxes get no GPU"
}
"""


def policy() -> CompiledPolicy:
    r = load_texts([("cluster.gwp", POLICY_TEXT)])
    assert r.policy is not None
    return r.policy


def extender(cluster: FakeCluster, settings: Settings | None = None) -> Extender:
    ext = Extender(cluster, policy(), settings or Settings(), clock=lambda: 1000.0)
    ext.nodes.relist()
    ext.pods.relist()
    return ext


def args(pod: dict[str, Any], *nodes: str) -> dict[str, Any]:
    return {"Pod": pod, "NodeNames": list(nodes)}


def bind(ext: Extender, pod: dict[str, Any], node: str) -> str:
    m = pod["metadata"]
    return str(ext.bind({"PodName": m["name"], "PodNamespace": m["namespace"],
                         "PodUID": m["uid"], "Node": node})["Error"])


def test_filter_keeps_nodes_that_fit_and_explains_the_others() -> None:
    c = FakeCluster()
    c.add_node("big", 80 * GIB, 80 * GIB)
    c.add_node("small", 10 * GIB)
    c.add_node("one", 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpu": 2, "gpumem": 20 * GIB})
    got = ext.filter(args(pod, "big", "small", "one", "ghost"))
    assert got["NodeNames"] == ["big"]
    assert got["FailedAndUnresolvableNodes"] == {
        "small": "gpuwarden: container main needs 2 GPUs with 20480MiB; the node has 1",
        "one": "gpuwarden: container main needs 2 GPUs with 20480MiB; the node has 1",
        "ghost": "gpuwarden: node ghost is not known to the extender (yet)"}
    assert got["Error"] == ""


def test_filter_answers_with_nodes_when_the_scheduler_sends_nodes() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    c.add_node("b", 1000)
    ext = extender(c)
    pod = c.add_pod("p", {"gpumem": 2000})
    got = ext.filter({"Pod": pod, "Nodes": {"items": [c.read_node("a"), c.read_node("b")]}})
    assert [n["metadata"]["name"] for n in got["Nodes"]["items"]] == ["a"]
    assert "GPU0 has 1000MiB in all, less than the 2000MiB asked" in got["FailedNodes"]["b"]


def test_a_policy_denial_is_unresolvable_and_quotes_the_rule() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    got = ext.filter(args(c.add_pod("p", {"gpu": 1}, namespace="sandbox"), "a"))
    assert got["FailedAndUnresolvableNodes"]["a"] == (
        'gpuwarden: container main: sandboxes get no GPU (policy rule "sandbox", cluster.gwp:7)')


def test_a_bad_pod_is_an_error_naming_the_pod_and_field() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpucores": 250})
    assert "pod default/p: container \"main\".resources.limits['nvidia.com/gpucores'] = 250" \
        in ext.filter(args(pod, "a"))["Error"]


def test_prioritize_scores_by_the_node_policy() -> None:
    c = FakeCluster()
    c.add_node("empty", 80 * GIB)
    c.add_node("busy", 80 * GIB)
    ext = extender(c)
    assert bind(ext, c.add_pod("first", {"gpumem": 40 * GIB, "gpucores": 50}), "busy") == ""
    pod = c.add_pod("second", {"gpumem": 1000})
    scores = {s["Host"]: s["Score"] for s in ext.prioritize(args(pod, "empty", "busy"))}
    assert scores["busy"] > scores["empty"]  # binpack by default
    spread = extender(c, Settings(node_scheduler_policy="spread"))
    scores = {s["Host"]: s["Score"] for s in spread.prioritize(args(pod, "empty", "busy"))}
    assert scores["empty"] > scores["busy"]


def test_bind_reserves_in_the_ledger_annotates_the_pod_and_binds() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB, 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpumem": 3000, "gpucores": 30})
    assert bind(ext, pod, "a") == ""
    assert c.bindings == [("default/p", "a")]
    ann = c.pods["default/p"]["metadata"]["annotations"]
    assignment = decode_assignment(ann[ASSIGNMENT])
    assert assignment.node == "a" and ann[BIND_PHASE] == "allocating"
    (grant,) = assignment.containers[0].devices
    assert (grant.memory_mib, grant.cores) == (3000, 30)
    assert ann[HAMI_DEVICES_TO_ALLOCATE] == f"{grant.uuid},NVIDIA,3000,30:;"
    ledger = decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS])
    assert [(r.uid, r.gpus) for r in ledger.reservations] == [
        ("uid-p", ((grant.uuid, 3000, 30, 1),))]


def test_two_replicas_with_stale_views_never_hand_out_the_same_memory() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    one, two = extender(c), extender(c)
    p1, p2 = c.add_pod("p1", {"gpumem": 60 * GIB}), c.add_pod("p2", {"gpumem": 60 * GIB})
    # both replicas filtered on the same empty node
    assert one.filter(args(p1, "a"))["NodeNames"] == ["a"]
    assert two.filter(args(p2, "a"))["NodeNames"] == ["a"]
    assert bind(one, p1, "a") == ""
    err = bind(two, p2, "a")
    assert "20480MiB free, needs 61440MiB" in err
    # its stale write was refused by the resourceVersion guard, then it re-read and re-fitted
    assert two.metrics.conflicts._value.get() == 1
    assert c.bindings == [("default/p1", "a")]


def test_concurrent_binds_from_two_replicas_stay_within_every_gpu() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB, 80 * GIB)
    replicas = [extender(c), extender(c)]
    pods = [c.add_pod(f"p{i}", {"gpumem": 10 * GIB, "gpucores": 20}) for i in range(24)]
    errors: list[str] = []

    def run(i: int) -> None:
        errors.append(bind(replicas[i % 2], pods[i], "a"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pods))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger = decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS])
    per_gpu: dict[str, list[int]] = {}
    for r in ledger.reservations:
        for uuid, mem, cores, slices in r.gpus:
            tot = per_gpu.setdefault(uuid, [0, 0, 0])
            tot[0] += mem
            tot[1] += cores
            tot[2] += slices
    assert all(m <= 80 * GIB and cr <= 100 and s <= 10 for m, cr, s in per_gpu.values())
    assert len(c.bindings) == 10 == len(ledger.reservations)  # 5 x 20% cores per GPU
    assert sum(1 for e in errors if e) == 14


def test_a_failed_binding_releases_the_reservation_at_once() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpumem": 60 * GIB})
    c.fail_bind = "etcd is on fire"
    err = bind(ext, pod, "a")
    assert "HTTP 500: etcd is on fire; its reservation was released" in err
    assert decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS]
                              ).reservations == ()
    ann = c.pods["default/p"]["metadata"]["annotations"]
    assert ann[BIND_PHASE] == "failed" and ASSIGNMENT not in ann
    c.fail_bind = None
    assert bind(ext, pod, "a") == ""


def test_a_deleted_pod_frees_its_slice_through_the_watch() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    p1 = c.add_pod("p1", {"gpumem": 60 * GIB})
    assert bind(ext, p1, "a") == ""
    p2 = c.add_pod("p2", {"gpumem": 60 * GIB})
    assert ext.filter(args(p2, "a"))["NodeNames"] == []
    ext.pods.apply({"type": "DELETED", "object": c.pods.pop("default/p1")})
    # the slice counts as free at once (kube-scheduler retries on the deletion itself, often
    # before the release reaches the API server): p2's reservation replaces p1's in one
    # guarded write, and the queued release finds nothing left to do
    assert ext.filter(args(p2, "a"))["NodeNames"] == ["a"]
    assert bind(ext, p2, "a") == ""
    ledger = decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS])
    assert [r.uid for r in ledger.reservations] == ["uid-p2"]
    node, uid, why = ext._releases.get_nowait()
    assert not ext.release(node, uid, why)


def test_orphan_reservations_are_released_after_the_grace() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    now = [1000.0]
    ext = Extender(c, policy(), Settings(), clock=lambda: now[0])
    ext.nodes.relist()
    ext.pods.relist()
    assert bind(ext, c.add_pod("p", {"gpumem": 1000}), "a") == ""
    c.pods.clear()
    ext.pods.relist()  # the pod vanished while no watch was open
    assert ext.release_orphans() == 0  # within the grace
    now[0] += 61
    assert ext.release_orphans() == 1
    assert decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS]
                              ).reservations == ()


@pytest.fixture
def served() -> Any:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = Extender(c, policy(), Settings())
    srv = JsonServer(("127.0.0.1", 0), {"/filter": ext.filter}, lambda: ext.ready,
                     ext.metrics.registry).start()
    yield c, ext, srv
    srv.shutdown()
    srv.server_close()


def _post(port: int, path: str, body: bytes) -> tuple[int, Any]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_http_ready_only_after_sync_and_bad_bodies_are_named(served: Any) -> None:
    c, ext, srv = served
    assert _get(srv.port, "/readyz")[0] == 503
    assert _get(srv.port, "/healthz") == (200, "ok")
    ext.nodes.relist()
    ext.pods.relist()
    assert _get(srv.port, "/readyz") == (200, "ok")
    code, body = _post(srv.port, "/filter", b"{nope")
    assert code == 400 and body["Error"].startswith("/filter: the body is not JSON")
    code, body = _post(srv.port, "/bind", b"{}")
    assert code == 404 and "POST one of /filter" in body["Error"]
    pod = c.add_pod("p", {"gpumem": 1000})
    code, body = _post(srv.port, "/filter", json.dumps(args(pod, "a")).encode())
    assert code == 200 and body["NodeNames"] == ["a"]
    _, text = _get(srv.port, "/metrics")
    assert 'gpuwarden_gpu_memory_capacity_bytes{gpu_uuid="GPU-a-0",node="a"} 8.589934592e+10' \
        in text
    assert "gpuwarden_extender_filter_seconds_count 1.0" in text


def test_a_repeated_bind_of_a_bound_pod_neither_undoes_nor_moves_it() -> None:
    # kube-scheduler calls bind again when a slow bind outlived its httpTimeout
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    c.add_node("b", 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpumem": 1000})
    assert bind(ext, pod, "a") == ""
    assert bind(ext, pod, "a") == ""
    assert bind(ext, pod, "b") == "gpuwarden: pod default/p is already bound to a"
    assert ASSIGNMENT in c.pods["default/p"]["metadata"]["annotations"]
    assert ALLOCATIONS not in c.nodes["b"]["metadata"]["annotations"]
    assert c.bindings == [("default/p", "a")]


def test_a_binding_whose_answer_was_lost_is_kept() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    pod = c.add_pod("p", {"gpumem": 1000})
    real = c.bind

    def bind_then_fail(namespace: str, name: str, uid: str, node: str) -> None:
        real(namespace, name, uid, node)
        raise TimeoutError("the answer was lost")

    c.bind = bind_then_fail
    assert bind(ext, pod, "a") == ""
    assert decode_allocations(c.nodes["a"]["metadata"]["annotations"][ALLOCATIONS]
                              ).get("uid-p") is not None
    assert ASSIGNMENT in c.pods["default/p"]["metadata"]["annotations"]


def test_the_pod_cache_keeps_a_few_fields_of_each_pod() -> None:
    c = FakeCluster()
    c.add_pod("p", {"gpumem": 1000}, annotations={"big": "x" * 10000})
    ext = extender(c)
    assert ext.pods.get("default/p") == {
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p",
                     "resourceVersion": c.pods["default/p"]["metadata"]["resourceVersion"]},
        "spec": {"nodeName": None, "schedulerName": None}, "status": {"phase": "Pending"}}
    ext.pods.apply({"type": "MODIFIED", "object": {**c.pods["default/p"],
                                                   "status": {"phase": "Running"}}})
    assert ext.pods.get("default/p")["status"] == {"phase": "Running"}


def test_a_failing_verb_still_answers_with_the_error(served: Any) -> None:
    _, _, srv = served

    def broken(args: Any) -> Any:
        raise KeyError("surprise")

    srv.routes["/filter"] = broken
    code, body = _post(srv.port, "/filter", b"{}")
    assert code == 500 and body == {"Error": "/filter: KeyError: 'surprise'"}


def test_capacity_answers_for_the_webhook_against_empty_nodes() -> None:
    from gpuwarden.placement import PodPlanner
    from policy.pods import workloads_from_manifest

    def planner(ext: Extender, mib: int) -> PodPlanner:
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpumem": mib}}}]}}
        return PodPlanner(workloads_from_manifest(pod, "p"), ext.policy, {})

    c = FakeCluster()
    assert extender(c).capacity(planner(extender(c), 10**6)) is None  # no GPU node known yet
    c.add_node("small", 1000)
    c.add_node("full", 80 * GIB)
    ext = extender(c)
    assert bind(ext, c.add_pod("hog", {"gpumem": 80 * GIB}), "full") == ""
    assert ext.capacity(planner(ext, 60 * GIB)) is None  # fits "full" once it empties
    assert ext.capacity(planner(ext, 90 * GIB)) == (
        "full: container c needs 1 GPU with 92160MiB, 0 fit: GPU0 has 81920MiB in all, less "
        "than the 92160MiB asked; small: container c needs 1 GPU with 92160MiB, 0 fit: GPU0 "
        "has 1000MiB in all, less than the 92160MiB asked")


def test_pods_waiting_for_our_scheduler_are_touched_when_capacity_frees() -> None:
    c = FakeCluster()
    c.add_node("a", 80 * GIB)
    ext = extender(c)
    p1 = c.add_pod("p1", {"gpumem": 60 * GIB})
    assert bind(ext, p1, "a") == ""
    c.add_pod("p2", {"gpumem": 60 * GIB})
    c.pods["default/p2"]["spec"]["schedulerName"] = "gpuwarden-scheduler"
    c.add_pod("p3", {"gpumem": 1})
    c.pods["default/p3"]["spec"]["schedulerName"] = "default-scheduler"
    ext.pods.relist()
    ext.pods.apply({"type": "DELETED", "object": c.pods.pop("default/p1")})
    ext._releases.put(None)  # let the loop end after the release
    ext._release_loop()
    assert "gpuwarden.io/retry" in c.pods["default/p2"]["metadata"]["annotations"]
    assert "gpuwarden.io/retry" not in c.pods["default/p3"]["metadata"]["annotations"]
    assert ext.metrics.nudges._value.get() == 1
