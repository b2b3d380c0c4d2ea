"""The pure Allocate core: which pod a request is for, and what its container gets."""

from __future__ import annotations

from dataclasses import replace

import pytest
from standin import UUIDS, assigned_pod, plain_pod, two_gpus

from deviceplugin.allocation import (
    CONTAINER_LIB,
    CONTAINER_REGION,
    AllocationError,
    ContainerSpec,
    HostPaths,
    PodView,
    match_pod,
    plan_container,
    preferred,
)
from gpuwarden.annotations import ALLOCATED, BIND_PHASE, encode_allocated
from gpuwarden.config import Settings
from gpuwarden.limit import MemoryLimit

GPUS = {g.uuid: g for g in two_gpus().gpus}
PATHS = HostPaths("/host/libvgpu.so", "/host/ld.so.preload", "/host/regions",
                  "/host/regions/node")
S = Settings()
A0, A1 = UUIDS
ID0, ID1 = f"{A0}::3", f"{A1}::7"


def match(pods: list[PodView], ids: list[str], settings: Settings = S) -> tuple[str, str]:
    m = match_pod(pods, "node-a", ids, GPUS, settings)
    return m.pod.name, m.container.name


def test_pod_whose_assigned_gpus_are_the_ids_gpus_wins_over_an_older_one() -> None:
    old = assigned_pod("old", [("c", [(A1, 1000, 0)])], created=1)
    exact = assigned_pod("exact", [("c", [(A0, 1000, 0)])], created=2)
    assert match([old, exact], [ID0]) == ("exact", "c")
    assert match([old, exact], [ID1]) == ("old", "c")


def test_oldest_allocating_pod_first_then_its_next_container() -> None:
    a = assigned_pod("a", [("c1", [(A1, 1, 0)]), ("c2", [(A1, 1, 0)])], created=5)
    b = assigned_pod("b", [("c", [(A1, 1, 0)])], created=9)
    assert match([b, a], [ID0]) == ("a", "c1")
    a2 = replace(a, annotations={**a.annotations, ALLOCATED: encode_allocated(["c1"])})
    assert match([b, a2], [ID0]) == ("a", "c2")


@pytest.mark.parametrize(("pods", "ids", "names"), [
    ([], [ID0], ["node node-a", "no pod is allocating"]),
    ([assigned_pod("two", [("c", [(A0, 1, 0), (A1, 1, 0)])])], [ID0],
     ["pod team/two", "'c' was assigned 2 GPUs, not 1"]),
    ([replace(assigned_pod("bad", [("c", [(A0, 1, 0)])]),
              annotations={"gpuwarden.io/assignment": "{", BIND_PHASE: "allocating"})],
     [ID0], ["pod team/bad was skipped", "gpuwarden.io/assignment", "not valid JSON"]),
    ([assigned_pod("p", [("c", [(A0, 1, 0)])], node="node-b")], [ID0], ["no pod"]),
    ([assigned_pod("p", [("c", [(A0, 1, 0)])])], ["GPU-zzz::1"], ["GPU-zzz", "does not have"]),
    ([assigned_pod("p", [("c", [(A0, 1, 0), (A0, 1, 0)])])], [ID0, f"{A0}::4"],
     ["distinct GPUs"]),
    ([plain_pod("p", 2)], [ID0], ["no pod"]),
    ([replace(plain_pod("p", 1), containers=(ContainerSpec("m", gpus=1,
                                                           other_gpu_resources=True),))],
     [ID0], ["pod default/p container 'm' asks for GPU memory or cores",
             "no gpuwarden.io/assignment", "gpuwarden-scheduler"]),
    ([], [], ["no device IDs"]),
])
def test_unmatchable_request_names_the_pods_and_why(pods: list[PodView], ids: list[str],
                                                     names: list[str]) -> None:
    with pytest.raises(AllocationError) as err:
        match(pods, ids)
    for part in names:
        assert part in str(err.value), str(err.value)


def test_pods_done_or_not_allocating_are_not_candidates() -> None:
    done = assigned_pod("done", [("c", [(A0, 1, 0)])])
    done = replace(done, annotations={**done.annotations, BIND_PHASE: "success"})
    running = replace(assigned_pod("running", [("c", [(A0, 1, 0)])]), phase="Running")
    with pytest.raises(AllocationError):
        match([done, running], [ID0])


def test_assigned_container_gets_its_limits_region_and_libvgpu() -> None:
    pod = assigned_pod("p", [("c", [(A1, 3000, 30), (A0, 2000, 30)])], priority=0)
    plan = plan_container(match_pod([pod], "node-a", [ID1, ID0], GPUS, S), GPUS, S, PATHS)
    e = plan.envs
    assert e["NVIDIA_VISIBLE_DEVICES"] == f"{A1},{A0}"
    assert e["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(3000 << 20)
    assert e["CUDA_DEVICE_MEMORY_LIMIT_1"] == str(2000 << 20)
    assert e["CUDA_DEVICE_SM_LIMIT"] == "30" and e["CUDA_TASK_PRIORITY"] == "0"
    assert e["GPU_CORE_UTILIZATION_POLICY"] == "default"
    assert e["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == CONTAINER_REGION
    assert e["GPUWARDEN_WORKLOAD"] == plan.wid
    assert plan.region_dir == "/host/regions/uid-p_c"
    mounts = {m.container_path: (m.host_path, m.read_only) for m in plan.mounts}
    assert mounts[CONTAINER_LIB] == ("/host/libvgpu.so", True)
    assert mounts["/etc/ld.so.preload"] == ("/host/ld.so.preload", True)
    assert mounts["/var/lib/gpuwarden/region"] == ("/host/regions/uid-p_c", False)
    assert plan.limits == (MemoryLimit.of_mib(3000), MemoryLimit.of_mib(2000))


def test_pod_without_assignment_gets_the_defaults_on_the_ids_gpus() -> None:
    m = match_pod([plain_pod("p", 1)], "node-a", [ID1], GPUS, S)
    assert not m.from_assignment
    plan = plan_container(m, GPUS, S, PATHS)
    assert plan.envs["NVIDIA_VISIBLE_DEVICES"] == A1
    assert plan.limits == (MemoryLimit.of_mib(5000),)
    assert "CUDA_DEVICE_SM_LIMIT" not in plan.envs
    whole = plan_container(match_pod([plain_pod("p", 1)], "node-a", [ID1], GPUS,
                                     Settings(default_mem_mib=0, device_memory_scaling=2)),
                           GPUS, Settings(default_mem_mib=0, device_memory_scaling=2), PATHS)
    assert whole.limits == (MemoryLimit.of_mib(2 * 81920),)


@pytest.mark.parametrize(("pod", "preload"), [
    (assigned_pod("p", [("c", [(A0, 1, 0)])], extra={"gpuwarden.io/preload": "false"}), False),
    (plain_pod("p", 1, env={"CUDA_DISABLE_CONTROL": "true"}), False),
    (plain_pod("p", 1), True),
])
def test_preload_opt_out_by_annotation_or_env(pod: PodView, preload: bool) -> None:
    plan = plan_container(match_pod([pod], "node-a", [ID0], GPUS, S), GPUS, S, PATHS)
    assert any(m.container_path == "/etc/ld.so.preload" for m in plan.mounts) is preload


def test_disablecorelimit_gives_no_compute_limit_and_driver_mounts_are_added() -> None:
    s = Settings(disable_core_limit=True,
                 driver_mounts=("/usr/lib/libcuda.so.1", "/var/sim:rw", "/dev/x:ro"))
    pod = assigned_pod("p", [("c", [(A0, 1000, 40)])])
    plan = plan_container(match_pod([pod], "node-a", [ID0], GPUS, s), GPUS, s, PATHS)
    assert "CUDA_DEVICE_SM_LIMIT" not in plan.envs
    assert plan.envs["GPU_CORE_UTILIZATION_POLICY"] == "disable"
    mounts = [(m.container_path, m.host_path, m.read_only) for m in plan.mounts]
    assert ("/usr/lib/libcuda.so.1", "/usr/lib/libcuda.so.1", True) in mounts
    assert ("/var/sim", "/var/sim", False) in mounts and ("/dev/x", "/dev/x", True) in mounts


def test_assignment_naming_a_gpu_this_node_lacks_is_refused_with_the_pod() -> None:
    pod = assigned_pod("p", [("c", [(A0, 1000, 0)])])
    m = match_pod([pod], "node-a", [ID0], GPUS, S)
    with pytest.raises(AllocationError, match="pod team/p container 'c' is assigned GPU"):
        plan_container(m, {A1: GPUS[A1]}, S, PATHS)


AVAIL = [f"{A0}::0", f"{A0}::1", f"{A1}::0", f"{A1}::1", f"{A1}::2"]


@pytest.mark.parametrize(("policy", "size", "must", "hint", "want"), [
    ("spread", 1, [], [], [f"{A1}::0"]),  # the GPU with the most free slices
    ("binpack", 1, [], [], [f"{A0}::0"]),  # the fullest GPU
    ("binpack", 2, [], [], [f"{A0}::0", f"{A1}::0"]),  # distinct GPUs
    ("spread", 2, [f"{A0}::1"], [], [f"{A0}::1", f"{A1}::0"]),
    ("spread", 1, [], [A0], [f"{A0}::0"]),  # the waiting pod's GPU first
    ("spread", 3, [], [], [f"{A1}::0", f"{A0}::0"]),  # never two slices of one GPU
])
def test_preferred_slices_are_on_distinct_gpus(policy: str, size: int, must: list[str],
                                               hint: list[str], want: list[str]) -> None:
    assert list(preferred(AVAIL, must, size, UUIDS, policy, hint)) == want
