"""Against a real kube-apiserver and kube-scheduler: the example pods are mutated by the webhook,
placed by the scheduler through the extender and bound to GPUs with the assignment annotations;
denied pods are refused at apply with the policy's message; a pod that cannot fit stays Pending
with the extender's reason in its events and schedules within seconds once capacity frees; a
burst of 500 pods onto 50 nodes x 8 GPUs never over-commits a GPU and loses no pod."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpucluster import GpuCluster, start_extender, stop
from kubernetes import client, utils
from kubernetes.client.rest import ApiException
from testbed import wait_for

from gpuwarden.annotations import (
    ALLOCATIONS,
    ASSIGNMENT,
    BIND_PHASE,
    HAMI_VGPU_NODE,
    decode_allocations,
    decode_assignment,
)

pytestmark = pytest.mark.k8s

REPO = Path(__file__).resolve().parents[2]
H200_MIB = 143771


def story(cluster: GpuCluster, ns: str, pod: str) -> str:
    """What a failed wait shows: the pod's events and the extender's last log lines."""
    v1 = client.CoreV1Api(cluster.api)
    events = v1.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod}").items
    lines = [f"{e.last_timestamp or e.event_time} {e.reason}: {e.message}" for e in events]
    return ("events of " + pod + ":\n  " + "\n  ".join(lines) + "\nextender log:\n"
            + "\n".join(cluster.log.read_text().splitlines()[-15:]))


def namespace(api: Any, name: str) -> str:
    v1 = client.CoreV1Api(api)
    try:
        v1.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as err:
        if err.status != 409:
            raise
    wait_for(lambda: _exists(lambda: v1.read_namespaced_service_account("default", name)), 30,
             f"the default ServiceAccount of {name}")
    return name


def _exists(fn: Callable[[], Any]) -> bool:
    try:
        fn()
        return True
    except ApiException:
        return False


def apply(api: Any, doc: dict[str, Any]) -> None:
    """What `kubectl apply` does for a new object: create it; the API server's refusal (with the
    webhook's message) is raised as an ApiException."""
    try:
        utils.create_from_dict(api, _quantities(doc))
    except utils.FailToCreateError as err:
        raise err.api_exceptions[0] from None


def _quantities(value: Any, key: str = "") -> Any:
    """YAML's numbers in resources as the strings the typed client wants (kubectl converts)."""
    if isinstance(value, dict):
        return {k: _quantities(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_quantities(v) for v in value]
    return str(value) if key.startswith("nvidia.com/") else value


def pods_of(api: Any, ns: str) -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(ns).items)


def bound(api: Any, ns: str, count: int) -> list[Any] | None:
    pods = pods_of(api, ns)
    ok = [p for p in pods if p.spec.node_name and ASSIGNMENT in (p.metadata.annotations or {})]
    return ok if len(ok) >= count else None


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "examples" / "pods" / name).read_text())


def grants(pod: Any) -> dict[str, list[tuple[int, int, int]]]:
    a = decode_assignment(pod.metadata.annotations[ASSIGNMENT])
    assert a.node == pod.spec.node_name
    return {c.name: [(d.index, d.memory_mib, d.cores) for d in c.devices] for c in a.containers}


def gpu_pod(name: str, gpumem: int, gpu_type: str, cores: int = 0) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": gpumem}
    if cores:
        limits["nvidia.com/gpucores"] = cores
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"nvidia.com/use-gputype": gpu_type}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"limits": _quantities(limits)}}]}}


def test_example_pods_are_mutated_placed_and_bound_to_gpus(gpu_cluster: GpuCluster) -> None:
    api = gpu_cluster.api
    for n in ("h200-a", "h200-b"):
        gpu_cluster.add_gpu_node(n, memory_mib=H200_MIB)
    gpu_cluster.wait_known(["h200-a", "h200-b"])
    for ns in ("ml-train", "serving", "notebook-alice"):
        namespace(api, ns)
    for f in ("training.yaml", "notebook.yaml", "inference-deployment.yaml",
              "research-burst.yaml"):
        apply(api, example(f))
    train = wait_for(lambda: bound(api, "ml-train", 2), 90, "the training pods bound")
    nb = wait_for(lambda: bound(api, "notebook-alice", 1), 60, "the notebook bound")[0]
    ranker = wait_for(lambda: bound(api, "serving", 3), 60, "the 3 ranker replicas bound")

    resnet = next(p for p in train if p.metadata.name == "resnet-train")
    assert resnet.spec.scheduler_name == "gpuwarden-scheduler"  # the webhook set it
    (g,) = grants(resnet)["trainer"]
    assert g[1:] == (30000, 60) and list(grants(resnet)) == ["trainer"]  # no log-shipper
    ann = resnet.metadata.annotations
    assert ann[BIND_PHASE] == "allocating" and ann[HAMI_VGPU_NODE] == resnet.spec.node_name
    limits = resnet.spec.containers[0].resources.limits
    assert limits["nvidia.com/priority"] == "0"  # filled in from the policy (training: high)
    # the notebook asked 12000 MiB; the notebooks rule clamps to 8GiB and defaults 20% cores
    assert [g[1:] for g in grants(nb)["notebook"]] == [(8192, 20)]
    assert nb.spec.containers[0].resources.limits["nvidia.com/gpucores"] == "20"
    # rankers: 25% of an H200 (inference default), cores clamped to 40%
    assert sorted(g[1:] for p in ranker for g in grants(p)["server"]) == [(35942, 40)] * 3
    # the research job: 4 whole H200s, exclusive, on one node
    study = next(p for p in train if p.metadata.name.startswith("scaling-study"))
    devices = grants(study)["trainer"]
    assert len({d[0] for d in devices}) == 4 and all(d[1:] == (131072, 100) for d in devices)
    # nothing on the study's GPUs but the study
    node = client.CoreV1Api(api).read_node(study.spec.node_name)
    ledger = decode_allocations(node.metadata.annotations[ALLOCATIONS])
    study_gpus = {u for r in ledger.reservations if r.uid == study.metadata.uid
                  for u, *_ in r.gpus}
    assert all(not study_gpus & {u for u, *_ in r.gpus} for r in ledger.reservations
               if r.uid != study.metadata.uid)


@pytest.mark.parametrize(("manifest", "ns", "message"), [
    ("sandbox.yaml", "sandbox-bob",
     "gpuwarden: pod sandbox-bob/experiment is denied by policy: container main: GPU use in "
     "sandbox namespaces needs the gpuwarden.io/approved=true label (policy rule "
     '"sandbox-approval", '),
    ("training-too-big.yaml", "ml-train",
     "gpuwarden: pod ml-train/llm-finetune is denied by policy: container trainer: requested "
     'gpumem 80GiB exceeds the cap 40GiB of rule "training" (policy rule "training", '),
])
def test_denied_pods_are_refused_at_apply_with_the_policy_message(
        gpu_cluster: GpuCluster, manifest: str, ns: str, message: str) -> None:
    namespace(gpu_cluster.api, ns)
    with pytest.raises(ApiException) as err:
        apply(gpu_cluster.api, example(manifest))
    assert err.value.status == 403
    said = json.loads(err.value.body)["message"]  # what kubectl apply prints
    assert said.startswith('admission webhook "mutate.gpuwarden.io" denied the request: '
                           + message)
    assert re.search(r"examples/policies/\S+\.gwp:\d+\)$", said), said
    assert pods_of(gpu_cluster.api, ns) == [] or all(
        p.metadata.name != example(manifest)["metadata"]["name"]
        for p in pods_of(gpu_cluster.api, ns))


def test_a_pod_no_gpu_can_hold_is_refused_at_apply(gpu_cluster: GpuCluster) -> None:
    gpu_cluster.add_gpu_node("tiny-x", gpus=1, memory_mib=10000, gpu_type="TinyX")
    gpu_cluster.wait_known(["tiny-x"])
    ns = namespace(gpu_cluster.api, "nofit")
    doc = gpu_pod("huge", 60000, "TinyX")
    doc["metadata"]["namespace"] = ns
    with pytest.raises(ApiException) as err:
        apply(gpu_cluster.api, doc)
    said = json.loads(err.value.body)["message"]
    assert "gpuwarden: pod nofit/huge fits no GPU node of the cluster, even empty: " in said
    assert "tiny-x: container main needs 1 GPU with 60000MiB, 0 fit: GPU0 has 10000MiB in " \
        "all, less than the 60000MiB asked" in said


def test_unfit_pod_waits_with_the_reason_and_schedules_when_capacity_frees(
        gpu_cluster: GpuCluster) -> None:
    api = gpu_cluster.api
    v1 = client.CoreV1Api(api)
    gpu_cluster.add_gpu_node("tiny", gpus=1, memory_mib=10000, gpu_type="TinyGPU")
    gpu_cluster.wait_known(["tiny"])
    ns = namespace(api, "waiting")
    for name in ("first", "second"):
        doc = gpu_pod(name, 8000, "TinyGPU")
        doc["metadata"]["namespace"] = ns
        apply(api, doc)
        if name == "first":
            wait_for(lambda: bound(api, ns, 1), 90, "the first pod bound",
                     detail=lambda: story(gpu_cluster, ns, "first"))
    reason = "tiny: gpuwarden: container main needs 1 GPU with 8000MiB, 0 fit: GPU0 2000MiB " \
        "free, needs 8000MiB (6000 short)"

    def explained() -> bool:
        events = v1.list_namespaced_event(ns, field_selector="involvedObject.name=second")
        return any(e.reason == "FailedScheduling" and "GPU0 2000MiB free, needs 8000MiB"
                   in (e.message or "") for e in events.items)

    wait_for(explained, 90, f"a FailedScheduling event of the second pod saying {reason!r}",
             detail=lambda: story(gpu_cluster, ns, "second"))
    assert v1.read_namespaced_pod("second", ns).spec.node_name is None
    v1.delete_namespaced_pod("first", ns, grace_period_seconds=0)  # no kubelet to confirm
    started = time.monotonic()
    wait_for(lambda: v1.read_namespaced_pod("second", ns).spec.node_name == "tiny", 90,
             "the second pod bound once the first was deleted",
             detail=lambda: story(gpu_cluster, ns, "second"))
    elapsed = time.monotonic() - started
    print(f"pending pod bound {elapsed:.1f}s after the deletion")
    assert elapsed < 30
    assert "gpuwarden_extender_releases_total" in gpu_cluster.metrics()


@pytest.mark.slow
def test_burst_of_500_pods_on_50_nodes_never_overcommits_a_gpu(gpu_cluster: GpuCluster) -> None:
    api = gpu_cluster.api
    nodes = [f"burst-{i:02d}" for i in range(50)]
    for n in nodes:
        gpu_cluster.add_gpu_node(n, gpus=8, memory_mib=81920, gpu_type="BurstGPU")
    gpu_cluster.wait_known(nodes)
    ns = namespace(api, "burst")
    v1 = client.CoreV1Api(api)
    names = [f"p{i:03d}" for i in range(500)]
    errors: list[str] = []
    started = time.monotonic()

    def create(chunk: list[str]) -> None:
        for name in chunk:
            doc = gpu_pod(name, 30000, "BurstGPU", cores=30)
            try:
                v1.create_namespaced_pod(ns, doc)
            except ApiException as err:
                errors.append(f"{name}: {err.body}")

    threads = [threading.Thread(target=create, args=(names[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    try:
        pods = wait_for(lambda: bound(api, ns, 500), 300, "all 500 pods bound", interval=0.2)
    except TimeoutError:
        waiting = [p.metadata.name for p in pods_of(api, ns) if not p.spec.node_name]
        events = v1.list_namespaced_event(ns, field_selector=f"involvedObject.name="
                                          f"{waiting[0]}").items if waiting else []
        raise AssertionError(f"{len(waiting)} pods not bound, e.g. {waiting[:5]}; events of "
                             f"the first: {[(e.reason, e.message) for e in events][-3:]}"
                             ) from None
    elapsed = time.monotonic() - started
    conflicts = re.search(r"^gpuwarden_extender_ledger_conflicts_total (\S+)$",
                          gpu_cluster.metrics(), re.M)
    print(f"500 pods created and bound in {elapsed:.1f}s; ledger conflicts retried: "
          f"{conflicts.group(1) if conflicts else '?'}")
    assert sorted(p.metadata.name for p in pods) == names  # zero lost pods
    per_gpu: dict[tuple[str, str], list[int]] = {}
    for p in pods:
        a = decode_assignment(p.metadata.annotations[ASSIGNMENT])
        assert a.node == p.spec.node_name
        for c in a.containers:
            for d in c.devices:
                tot = per_gpu.setdefault((a.node, d.uuid), [0, 0, 0])
                tot[0] += d.memory_mib
                tot[1] += d.cores
                tot[2] += 1
    assert all(m <= 81920 and c <= 100 and s <= 10 for m, c, s in per_gpu.values()), per_gpu
    # every node's ledger holds exactly what its pods' annotations say
    for n in nodes:
        ledger = decode_allocations(v1.read_node(n).metadata.annotations.get(
            ALLOCATIONS, '{"version":1,"pods":[]}'))
        held: dict[tuple[str, str], list[int]] = {}
        for r in ledger.reservations:
            for uuid, mem, cores, slices in r.gpus:
                t = held.setdefault((n, uuid), [0, 0, 0])
                t[0] += mem
                t[1] += cores
                t[2] += slices
        assert held == {k: v for k, v in per_gpu.items() if k[0] == n}


def test_two_extender_replicas_binding_at_once_never_share_a_slice(
        gpu_cluster: GpuCluster, tmp_path: Path) -> None:
    """Two replicas, each asked to bind half of 12 pods to one node that holds 4: the API server's
    resourceVersion check on the node's ledger lets exactly 4 through, no GPU over-committed."""
    from testbed.procs import free_ports

    api = gpu_cluster.api
    v1 = client.CoreV1Api(api)
    gpu_cluster.add_gpu_node("race", gpus=2, memory_mib=81920, gpu_type="RaceGPU")
    (port,) = free_ports(1)
    second = start_extender(gpu_cluster.cp.admin_kubeconfig, port, tmp_path / "replica.log")
    try:
        gpu_cluster.wait_known(["race"])
        ns = namespace(api, "race")
        pods = []
        for i in range(12):
            doc = gpu_pod(f"r{i}", 30000, "RaceGPU")
            doc["spec"]["schedulerName"] = "nobody"  # we play the scheduler here
            pods.append(v1.create_namespaced_pod(ns, doc))
        answers: list[str] = []

        def bind(i: int) -> None:
            m = pods[i].metadata
            body = json.dumps({"PodName": m.name, "PodNamespace": ns, "PodUID": m.uid,
                               "Node": "race"}).encode()
            target = gpu_cluster.port if i % 2 else port
            req = urllib.request.Request(f"http://127.0.0.1:{target}/bind", data=body)
            with urllib.request.urlopen(req, timeout=60) as r:
                answers.append(json.loads(r.read())["Error"])

        threads = [threading.Thread(target=bind, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(a == "" for a in answers) == [False] * 8 + [True] * 4, answers
        bound_pods = [p for p in pods_of(api, ns) if p.spec.node_name == "race"]
        assert len(bound_pods) == 4
        per_gpu: dict[str, int] = {}
        for p in bound_pods:
            for c in decode_assignment(p.metadata.annotations[ASSIGNMENT]).containers:
                for d in c.devices:
                    per_gpu[d.uuid] = per_gpu.get(d.uuid, 0) + d.memory_mib
        assert sorted(per_gpu.values()) == [60000, 60000]
        ledger = decode_allocations(v1.read_node("race").metadata.annotations[ALLOCATIONS])
        assert sorted(r.uid for r in ledger.reservations) == sorted(
            p.metadata.uid for p in bound_pods)
        conflicts = sum(float(m.group(1)) for text in (gpu_cluster.metrics(),
                                                        gpu_cluster.metrics(port))
                        for m in [re.search(r"^gpuwarden_extender_ledger_conflicts_total "
                                            r"(\S+)$", text, re.M)] if m)
        print(f"two replicas: {conflicts:.0f} ledger writes refused by the API server "
              "(409) and retried")
    finally:
        stop(second)


def test_an_edited_policy_file_is_applied_without_a_restart(
        gpu_cluster: GpuCluster, tmp_path: Path) -> None:
    from testbed.procs import free_ports

    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "p.gwp").write_text('version 1\n\ndefaults {\n  gpumem = 1000MiB\n}\n')
    gpu_cluster.add_gpu_node("reload", gpus=1, memory_mib=81920)
    (port,) = free_ports(1)
    replica = start_extender(gpu_cluster.cp.admin_kubeconfig, port, tmp_path / "r.log",
                             policy=folder)
    try:
        pod = {"metadata": {"name": "p", "namespace": "labs", "uid": "u", "annotations": {}},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {
                   "nvidia.com/gpu": "1"}}}]}}

        def filtered() -> dict[str, Any]:
            body = json.dumps({"Pod": pod, "NodeNames": ["reload"]}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/filter", data=body)
            with urllib.request.urlopen(req, timeout=30) as r:
                return dict(json.loads(r.read()))

        wait_for(lambda: filtered()["NodeNames"] == ["reload"], 30, "the node known, the pod fit")
        (folder / "p.gwp").write_text(
            'version 1\n\ndefaults {\n  gpumem = 1000MiB\n}\n\nrule "labs" {\n'
            '  match namespace == "labs"\n  deny "labs are closed"\n}\n')
        started = time.monotonic()
        wait_for(lambda: "labs are closed" in str(filtered()["FailedAndUnresolvableNodes"]), 30,
                 "the edited policy applied", detail=lambda: (tmp_path / "r.log").read_text())
        print(f"policy edit applied {time.monotonic() - started:.1f}s after the write")
        (folder / "p.gwp").write_text("version 1\n\nrule {")  # broken: the last good one stays
        wait_for(lambda: "policy_reload_failed" in (tmp_path / "r.log").read_text(), 30,
                 "the broken policy refused")
        assert "labs are closed" in str(filtered()["FailedAndUnresolvableNodes"])
    finally:
        stop(replica)
