"""The DRA driver's pure core: the ResourceSlice the node publishes, and what a claim's
allocation turns into (limits, env, mounts, region folder, CDI spec)."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from fakes import NODE, UUIDS, claim, result, two_gpus

from deviceplugin.allocation import CONTAINER_PRELOAD, HostPaths
from draplugin.core import (
    ClaimError,
    cdi_spec,
    plan_claim,
    resource_slice,
    same_devices,
)
from gpuwarden.config import Settings
from gpuwarden.limit import MemoryLimit
from gpuwarden.quantity import parse_quantity

GIB = 1 << 30
PATHS = HostPaths(libvgpu="/opt/gw/libvgpu.so", preload_file="/r/ld.so.preload",
                  region_root="/r/claims", node_dir="/r/node")


def test_each_gpu_is_one_shareable_device_with_scaled_memory_and_the_default_requests() -> None:
    s = Settings(device_memory_scaling=1.5, default_mem_mib=4096, default_cores=20)
    body = resource_slice(NODE, two_gpus().gpus, s, generation=3)
    spec = body["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]) == (
        "gpuwarden.io", NODE, {"name": NODE, "generation": 3, "resourceSliceCount": 1})
    d0 = spec["devices"][0]
    assert d0["name"] == "gpu-0" and d0["allowMultipleAllocations"] is True
    assert d0["attributes"] == {"model": {"string": "NVIDIA H200"}, "uuid": {"string": UUIDS[0]},
                                "index": {"int": 0}, "numa": {"int": 0},
                                "healthy": {"bool": True}}
    assert d0["capacity"]["memory"] == {
        "value": f"{81920 * 3 // 2}Mi",
        "requestPolicy": {"default": "4096Mi", "validRange": {"min": "1Mi", "step": "1Mi"}}}
    assert d0["capacity"]["cores"] == {
        "value": "100", "requestPolicy": {"default": "20", "validRange": {"min": "0",
                                                                          "step": "1"}}}
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]


def test_default_memory_of_zero_means_the_whole_gpu() -> None:
    body = resource_slice(NODE, two_gpus().gpus, Settings(default_mem_mib=0), 1)
    assert body["spec"]["devices"][1]["capacity"]["memory"]["requestPolicy"]["default"] == \
        "81920Mi"


@pytest.mark.parametrize(("text", "value"), [("1Gi", GIB), ("1500M", 1_500_000_000),
                                             ("10", 10), ("1e3", 1000),
                                             ("250m", Fraction(1, 4)), ("0.5Gi", GIB // 2)])
def test_quantities_are_read_exactly(text: str, value: object) -> None:
    assert parse_quantity(text, "x") == value


def test_a_bad_quantity_names_the_place() -> None:
    c = claim("c", "u1", [result(memory="lots")])
    with pytest.raises(ClaimError, match=r"claim ns/c status.allocation.devices.results\[0\]"
                       r".consumedCapacity.memory: 'lots' is not a Kubernetes quantity"):
        plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS)


def test_a_claim_of_1gib_and_10_percent_gets_those_limits_its_region_and_libvgpu() -> None:
    c = claim("c", "u1", [result(device="gpu-1", memory="1Gi", cores="10")])
    plan = plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS)
    (u,) = plan.units
    assert u.wid == "u1_gpu" and u.region_dir == "/r/claims/u1_gpu"
    assert [(g.uuid, g.cores) for g in u.grants] == [(UUIDS[1], 10)]
    assert u.limits == (MemoryLimit(GIB),)
    assert u.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(GIB)
    assert u.envs["CUDA_DEVICE_SM_LIMIT"] == "10"
    assert u.envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[1]
    assert u.envs["CUDA_TASK_PRIORITY"] == "1"
    assert {m.container_path for m in u.mounts} >= {CONTAINER_PRELOAD,
                                                    "/usr/local/gpuwarden/lib/libvgpu.so"}
    assert u.cdi_id == "gpuwarden.io/claim=u1_gpu"
    spec = cdi_spec(plan)
    assert spec["kind"] == "gpuwarden.io/claim"
    (dev,) = spec["devices"]
    assert dev["name"] == "u1_gpu"
    assert f"CUDA_DEVICE_MEMORY_LIMIT={GIB}" in dev["containerEdits"]["env"]
    region = next(m for m in dev["containerEdits"]["mounts"]
                  if m["hostPath"] == "/r/claims/u1_gpu")
    assert region["options"][0] == "rw"


def test_each_request_is_its_own_unit_and_two_gpus_of_one_request_share_it() -> None:
    c = claim("c", "u2", [result("gpu-0", "2Gi", "0", request="a", share="x"),
                          result("gpu-1", "3Gi", "0", request="a", share="y"),
                          result("gpu-0", "1Gi", "5", request="b/small", share="z")])
    plan = plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS)
    assert [(u.wid, u.limits) for u in plan.units] == [
        ("u2_a", (MemoryLimit(2 * GIB), MemoryLimit(3 * GIB))),
        ("u2_b.small", (MemoryLimit(GIB),))]
    assert "CUDA_DEVICE_SM_LIMIT" not in plan.units[0].envs  # 0 cores: no compute limit


def test_without_consumed_capacity_a_share_is_the_whole_gpu() -> None:
    c = claim("c", "u3", [result(memory=None, cores=None)])
    (u,) = plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS).units
    assert u.limits == (MemoryLimit.of_mib(81920),)


def test_class_then_claim_config_set_priority_and_core_policy() -> None:
    params = {"apiVersion": "gpuwarden.io/v1", "kind": "GpuConfig"}
    c = claim("c", "u4", [result()], config=[
        {"source": "FromClaim", "opaque": {"driver": "gpuwarden.io",
                                           "parameters": {**params, "corePolicy": "force"}}},
        {"source": "FromClass", "opaque": {"driver": "gpuwarden.io",
                                           "parameters": {**params, "priority": "high",
                                                          "corePolicy": "disable"}}}])
    (u,) = plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS).units
    assert (u.priority, u.core_policy) == (0, "force")
    assert u.envs["CUDA_TASK_PRIORITY"] == "0"


def test_unknown_config_keys_are_refused_with_the_valid_ones() -> None:
    c = claim("c", "u5", [result()], config=[{"source": "FromClaim", "opaque": {
        "driver": "gpuwarden.io", "parameters": {"apiVersion": "gpuwarden.io/v1",
                                                 "kind": "GpuConfig", "prio": 0}}}])
    with pytest.raises(ClaimError, match="unknown key 'prio'; valid keys: apiVersion, kind, "
                                         "priority, corePolicy"):
        plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS)


@pytest.mark.parametrize(("res", "message"), [
    (result(device="gpu-7"), "device gpu-7, which node node-a does not have"),
    (result(pool="node-b"), "of pool 'node-b', not of this node 'node-a'"),
    (result(driver="other.io"), "has no device of driver gpuwarden.io"),
])
def test_claims_this_node_cannot_serve_are_refused_naming_the_claim(res: dict, message: str
                                                                   ) -> None:
    with pytest.raises(ClaimError, match=f"claim ns/c .*{message}"):
        plan_claim(claim("c", "u6", [res]), NODE, two_gpus().gpus, Settings(), PATHS)


def test_an_unallocated_claim_is_refused() -> None:
    c = claim("c", "u7", [])
    c["status"] = {}
    with pytest.raises(ClaimError, match="claim ns/c is not allocated"):
        plan_claim(c, NODE, two_gpus().gpus, Settings(), PATHS)


def test_a_slice_read_back_in_canonical_quantities_is_the_same() -> None:
    want = resource_slice(NODE, two_gpus().gpus, Settings(), 1)["spec"]["devices"]
    back = copy.deepcopy(want)
    back[0]["capacity"]["memory"]["value"] = "80Gi"  # the API server's form of 81920Mi
    assert same_devices(back, want)
    back[0]["attributes"]["healthy"] = {"bool": False}
    assert not same_devices(back, want)
