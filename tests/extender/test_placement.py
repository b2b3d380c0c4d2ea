"""The placement core, by tables: fit by memory / cores / slices / count / selectors / health,
binpack and spread, init containers, policy denials, and every rejected node explained."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pytest

from gpuwarden.annotations import GpuDevice, NodeInventory
from gpuwarden.placement import (
    Denial,
    Fit,
    Misfit,
    NodeState,
    PlacementError,
    PodPlanner,
    PodRequest,
    Usage,
    choose,
    fit,
    node_usage,
    pod_usage,
)
from policy import load_texts
from policy.compiler import CompiledPolicy
from policy.pods import workloads_from_manifest

POLICY_TEXT = """version 1
defaults {
  gpu = 1
  gpumem = 5000MiB
  gpucores = 0%
}
rule "notebooks" {
  match namespace == "nb"
  cap gpumem <= 8GiB
}
rule "sandbox" {
  match namespace == "sandbox"
  deny "sandboxes get no GPU"
}
rule "pool-b" {
  match node_label "pool" == "b"
  deny "pool b is reserved"
}
"""


def _policy() -> CompiledPolicy:
    result = load_texts([("cluster.gwp", POLICY_TEXT)])
    assert result.ok and result.policy is not None, result.diagnostics
    return result.policy


POLICY = _policy()
GIB = 1024


def manifest(*containers: Mapping[str, int], init: Sequence[Mapping[str, int]] = (),
             namespace: str = "default", annotations: Mapping[str, str] | None = None,
             ) -> dict[str, object]:
    def spec(prefix: str, i: int, limits: Mapping[str, int]) -> dict[str, object]:
        return {"name": f"{prefix}{i}", "resources": {"limits": {
            f"nvidia.com/{k}": v for k, v in limits.items()}}}

    return {"kind": "Pod", "metadata": {"name": "p", "namespace": namespace,
                                        "annotations": dict(annotations or {})},
            "spec": {"containers": [spec("c", i, c) for i, c in enumerate(containers)],
                     "initContainers": [spec("i", i, c) for i, c in enumerate(init)]}}


def planner(doc: Mapping[str, object], **kw: object) -> PodPlanner:
    return PodPlanner(workloads_from_manifest(doc, "pod.yaml"), POLICY,
                      doc["metadata"]["annotations"], **kw)


def request(*containers: Mapping[str, int], **kw: object) -> PodRequest:
    pr = planner(manifest(*containers, **kw)).request()
    assert isinstance(pr, PodRequest), pr
    return pr


def node(name: str, *mibs: int, split: int = 10, used: Mapping[int, Usage] | None = None,
         gpu_type: str = "NVIDIA H200", unhealthy: Sequence[int] = ()) -> NodeState:
    devices = tuple(GpuDevice(f"GPU-{name}-{i}", i, m, 100, gpu_type, 0, i not in unhealthy)
                    for i, m in enumerate(mibs))
    return NodeState(name, NodeInventory(devices, split),
                     {f"GPU-{name}-{i}": u for i, u in (used or {}).items()})


def placed(result: Fit | Misfit) -> dict[str, list[tuple[int, int, int]]]:
    assert isinstance(result, Fit), result
    return {c.name: [(d.index, d.memory_mib, d.cores) for d in c.devices]
            for c in result.assignment.containers}


def misfit(result: Fit | Misfit) -> Misfit:
    assert isinstance(result, Misfit), result
    return result


def test_four_60gib_workloads_on_two_80gib_gpus_admit_two_and_explain_the_third() -> None:
    n = node("n", 80 * GIB, 80 * GIB)
    want = request({"gpu": 1, "gpumem": 60 * GIB})
    assignments = []
    for _ in range(2):
        r = fit(n, want)
        assert isinstance(r, Fit)
        assignments.append(r.assignment)
        n = NodeState(n.name, n.inventory, node_usage(assignments))
    third = misfit(fit(n, want))
    assert third.kinds == ("memory",)
    assert third.reason == ("gpuwarden: container c0 needs 1 GPU with 61440MiB, 0 fit: "
                            "GPU0-1 20480MiB free, needs 61440MiB (40960 short)")


@pytest.mark.parametrize(("used", "ask", "kind", "text"), [
    (Usage(0, 60, 1), {"gpucores": 50}, "cores", "GPU0 40% cores free, needs 50% (10 short)"),
    (Usage(1000, 0, 1), {"gpucores": 100}, "exclusive",
     "GPU0 needs the GPU alone (cores 100) but 1 container use it"),
    (Usage(1000, 100, 1), {"gpumem": 10}, "exclusive", "GPU0 its compute is fully given out"),
    (Usage(1000, 0, 2), {"gpumem": 10}, "slices", "GPU0 all 2 slices taken"),
    (Usage(), {"gpumem": 90000}, "memory",
     "GPU0 has 81920MiB in all, less than the 90000MiB asked"),
])
def test_one_gpu_lacking_one_resource_names_it_and_how_short(
        used: Usage, ask: Mapping[str, int], kind: str, text: str) -> None:
    result = misfit(fit(node("n", 80 * GIB, split=2, used={0: used}), request(ask)))
    assert result.kinds == (kind,)
    assert result.reason.endswith(text)


@pytest.mark.parametrize(("ask", "grant"), [
    ({"gpumem": 3000, "gpucores": 30}, [(0, 3000, 30)]),
    ({"gpumem-percentage": 50}, [(0, 40960, 0)]),
    ({"gpucores": 100}, [(0, 5000, 100)]),  # the defaults block's 5000MiB
    ({"gpu": 2, "gpumem": 1000}, [(0, 1000, 0), (1, 1000, 0)]),
])
def test_grants_apply_percentages_and_policy_defaults(ask: Mapping[str, int],
                                                      grant: list[tuple[int, int, int]]) -> None:
    assert placed(fit(node("n", 80 * GIB, 80 * GIB), request(ask))) == {"c0": grant}


def test_policy_cap_clamps_the_grant() -> None:
    got = placed(fit(node("n", 80 * GIB), request({"gpumem": 12000}, namespace="nb")))
    assert got == {"c0": [(0, 8192, 0)]}


def test_more_gpus_than_the_node_has_says_how_many_it_has() -> None:
    result = misfit(fit(node("n", 80 * GIB), request({"gpu": 2})))
    assert result.kinds == ("gpu_count",)
    assert result.reason == "gpuwarden: container c0 needs 2 GPUs with 5000MiB; the node has 1"


def test_a_node_without_gpus_is_rejected_as_such() -> None:
    result = misfit(fit(NodeState("bare", NodeInventory(())), request({"gpu": 1})))
    assert result.kinds == ("no_gpus",)


@pytest.mark.parametrize(("annotations", "fits", "reason"), [
    ({"nvidia.com/use-gputype": "a100,h100"}, [], "GPU0-1 type 'NVIDIA H200' is not in"),
    ({"nvidia.com/use-gputype": "H200"}, [0], ""),
    ({"nvidia.com/nouse-gputype": "h200"}, [], "is excluded by nvidia.com/nouse-gputype"),
    ({"nvidia.com/use-gpuuuid": "GPU-n-1"}, [1], ""),
    ({"nvidia.com/nouse-gpuuuid": "GPU-n-0, GPU-n-1"}, [], "GPU0-1 excluded by"),
])
def test_type_and_uuid_selectors(annotations: Mapping[str, str], fits: list[int],
                                 reason: str) -> None:
    result = fit(node("n", 80 * GIB, 80 * GIB, used={1: Usage(1000, 0, 1)}),
                 request({"gpu": 1}, annotations=annotations))
    if fits:
        assert [d[0] for d in placed(result)["c0"]] == fits
    else:
        assert misfit(result).kinds == ("selector",)
        assert reason in misfit(result).reason


def test_unhealthy_gpus_are_skipped_and_named() -> None:
    n = node("n", 80 * GIB, 80 * GIB, unhealthy=[0])
    assert placed(fit(n, request({"gpu": 1}))) == {"c0": [(1, 5000, 0)]}
    result = misfit(fit(n, request({"gpu": 2})))
    assert result.kinds == ("unhealthy",) and "GPU0 unhealthy" in result.reason


@pytest.mark.parametrize(("policy", "gpu"), [("spread", 1), ("binpack", 0)])
def test_gpu_policy_picks_the_emptiest_or_the_fullest_gpu(policy: str, gpu: int) -> None:
    n = node("n", 80 * GIB, 80 * GIB, used={0: Usage(20 * GIB, 30, 1)})
    got = placed(fit(n, request({"gpumem": 1000},
                                annotations={"hami.io/gpu-scheduler-policy": policy})))
    assert got["c0"][0][0] == gpu


@pytest.mark.parametrize(("policy", "chosen"), [("binpack", "busy"), ("spread", "idle")])
def test_node_policy_prefers_the_fullest_or_the_emptiest_node(policy: str, chosen: str) -> None:
    nodes = [node("idle", 80 * GIB), node("busy", 80 * GIB, used={0: Usage(40 * GIB, 50, 3)}),
             node("small", 1000)]
    best, misfits = choose(nodes, request({"gpumem": 2000},
                                          annotations={"hami.io/node-scheduler-policy": policy}))
    assert best is not None and best.node == chosen
    assert [m.node for m in misfits] == ["small"]


def test_node_policy_flag_is_the_default_and_the_annotation_overrides_it() -> None:
    doc = manifest({"gpu": 1})
    assert planner(doc, node_policy="spread").node_policy == "spread"
    doc["metadata"]["annotations"] = {"hami.io/node-scheduler-policy": "binpack"}
    assert planner(doc, node_policy="spread").node_policy == "binpack"


def test_a_bad_scheduler_policy_annotation_is_named() -> None:
    with pytest.raises(PlacementError, match=re.escape(
            "hami.io/gpu-scheduler-policy: 'pack' is not one of binpack | spread")):
        planner(manifest({"gpu": 1}, annotations={"hami.io/gpu-scheduler-policy": "pack"}))


def test_init_container_reuses_the_gpu_of_the_app_containers() -> None:
    # 60 + 60 GiB on one 80 GiB GPU fits because the init container is done first.
    want = request({"gpumem": 60 * GIB}, init=[{"gpumem": 60 * GIB}])
    result = fit(node("n", 80 * GIB), want)
    assert placed(result) == {"c0": [(0, 61440, 0)], "i0": [(0, 61440, 0)]}
    assert isinstance(result, Fit)
    assert result.footprint == {"GPU-n-0": Usage(61440, 0, 1)}
    assert pod_usage(result.assignment) == {"GPU-n-0": Usage(61440, 0, 1)}


def test_app_containers_add_up_on_a_shared_gpu() -> None:
    result = fit(node("n", 80 * GIB), request({"gpumem": 30 * GIB, "gpucores": 40},
                                              {"gpumem": 30 * GIB, "gpucores": 40}))
    assert isinstance(result, Fit)
    assert result.footprint == {"GPU-n-0": Usage(61440, 80, 2)}
    second = misfit(fit(node("n", 80 * GIB), request({"gpumem": 50 * GIB}, {"gpumem": 50 * GIB})))
    assert "container c1" in second.reason


def test_policy_denial_names_the_rule_and_its_file_line() -> None:
    got = planner(manifest({"gpu": 1}, namespace="sandbox")).request()
    assert got == Denial('container c0: sandboxes get no GPU (policy rule "sandbox", '
                         "cluster.gwp:13)")


def test_a_node_label_rule_denies_on_that_pool_only_and_is_evaluated_once_per_pool() -> None:
    p = planner(manifest({"gpu": 1}))
    calls = 0
    evaluate = p.policy.evaluate

    class Counting:
        rules = p.policy.rules

        def evaluate(self, w: object) -> object:
            nonlocal calls
            calls += 1
            return evaluate(w)

    p.policy = Counting()
    for i in range(50):
        assert isinstance(p.request(f"a{i}", {"pool": "a", "kubernetes.io/hostname": f"a{i}"}),
                          PodRequest)
        assert isinstance(p.request(f"b{i}", {"pool": "b"}), Denial)
    assert calls == 2


def test_pods_without_gpu_containers_want_no_gpu() -> None:
    doc = {"kind": "Pod", "metadata": {"name": "p", "annotations": {}},
           "spec": {"containers": [{"name": "web"}]}}
    assert not planner(doc).wants_gpu


def test_gpus_lacking_the_same_thing_share_one_entry() -> None:
    used = {i: Usage(70 * GIB, 0, 1) for i in (0, 1, 2, 5)} | {3: Usage(0, 100, 1),
                                                              4: Usage(0, 0, 10)}
    n = node("n", *([80 * GIB] * 7), used=used, unhealthy=[6])
    result = misfit(fit(n, request({"gpumem": 20 * GIB})))
    assert result.reason == (
        "gpuwarden: container c0 needs 1 GPU with 20480MiB, 0 fit: GPU0-2,5 10240MiB free, "
        "needs 20480MiB (10240 short); GPU3 its compute is fully given out; GPU4 all 10 slices "
        "taken; GPU6 unhealthy")
