"""The plugin over real gRPC on unix sockets, driven by a stand-in kubelet: registration only
once serving, ListAndWatch with health updates, GetPreferredAllocation, Allocate (the region and
annotations it writes, and bad requests that apply nothing), PreStartContainer's check,
re-registration after a kubelet restart, and a clean stop."""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from standin import (
    UUIDS,
    Bed,
    StandinKubelet,
    StandinPodResources,
    assigned_pod,
    bind_phase,
    plain_pod,
)

from deviceplugin.api import device_plugin
from gpuwarden.annotations import ALLOCATED, HAMI_NODE_REGISTER, NODE_GPUS, decode_node_gpus
from libvgpu.region import Region

pb = device_plugin().pb
A0, A1 = UUIDS


def allocate(bed: Bed, *containers: list[str]) -> object:
    return bed.stub.Allocate(pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=ids) for ids in containers]), timeout=5)


def test_registers_once_serving_with_the_resource_and_options(make_bed) -> None:
    bed = make_bed()
    _, req, opts_seen_by_kubelet = bed.kubelet.next_registration()
    assert (req.version, req.endpoint, req.resource_name) == ("v1beta1", "gpuwarden.sock",
                                                              "nvidia.com/gpu")
    assert req.options.pre_start_required and req.options.get_preferred_allocation_available
    # the kubelet dialled the plugin inside Register: it was serving before registering
    assert opts_seen_by_kubelet.pre_start_required


def test_list_and_watch_advertises_every_slice_and_streams_health_changes(make_bed) -> None:
    from standin import ListAndWatchReader

    bed = make_bed()
    watch = ListAndWatchReader(bed.stub)
    _, first = watch.wait(lambda r: len(r.devices) == 20)
    assert {d.health for d in first.devices} == {"Healthy"}
    numa = {d.ID: [n.ID for n in d.topology.nodes] for d in first.devices}
    assert numa[f"{A1}::9"] == [1] and numa[f"{A0}::0"] == [0]
    bed.inventory.set_health(A1, False)
    t0 = time.monotonic()
    at, resp = watch.wait(lambda r: any(d.health == "Unhealthy" for d in r.devices))
    assert {d.ID for d in resp.devices if d.health == "Unhealthy"} == \
        {f"{A1}::{k}" for k in range(10)}
    assert at - t0 < 1.0
    inv = decode_node_gpus(bed.cluster.nodes["node-a"][NODE_GPUS])
    assert [d.healthy for d in inv.devices] == [True, False]
    assert HAMI_NODE_REGISTER in bed.cluster.nodes["node-a"]
    watch.cancel()


def test_preferred_allocation_puts_a_containers_slices_on_distinct_gpus(make_bed) -> None:
    bed = make_bed()
    avail = [f"{u}::{k}" for u in UUIDS for k in range(3)]
    resp = bed.stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=avail,
                                               allocation_size=2)]), timeout=5)
    ids = list(resp.container_responses[0].deviceIDs)
    assert len(ids) == 2 and {i.split("::")[0] for i in ids} == set(UUIDS)


def test_allocate_answers_from_the_assignment_and_writes_region_and_annotations(make_bed,
                                                                                ) -> None:
    bed = make_bed()
    bed.cluster.add(assigned_pod("p", [("c", [(A1, 3000, 30)])]))
    resp = allocate(bed, [f"{A1}::2"])
    (c,) = resp.container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == A1
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(3000 << 20)
    mounts = {m.container_path: m for m in c.mounts}
    host_dir = Path(mounts["/var/lib/gpuwarden/region"].host_path)
    assert host_dir == bed.regions / "uid-p_c"
    assert mounts["/usr/local/gpuwarden/lib/libvgpu.so"].read_only
    assert Path(mounts["/etc/ld.so.preload"].host_path).read_text() == \
        "/usr/local/gpuwarden/lib/libvgpu.so\n"
    with Region.open(host_dir / "vgpu.region") as r:
        dev = r.snapshot().device(A1)
        assert dev.limit_bytes == 3000 << 20
        assert r.compute_state(A1).limit_pct == 30
    assert bind_phase(bed.cluster, "p") == "success"
    assert bed.cluster.pod("p").annotations[ALLOCATED] == '["c"]'


def test_a_pod_asking_only_for_gpus_gets_default_slices(make_bed) -> None:
    bed = make_bed()
    bed.cluster.add(plain_pod("plain", 2))
    (c,) = allocate(bed, [f"{A0}::0", f"{A1}::0"]).container_responses
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == f"{A0},{A1}"
    assert c.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == str(5000 << 20)


@pytest.mark.parametrize(("ids", "names"), [
    ([f"{A0}::1"], ["no pod on node node-a waits for 1 GPU slice", "team/two",
                    "assigned 2 GPUs, not 1"]),
    (["GPU-nope::1"], ["GPU-nope", "which this node does not have"]),
    (["garbage"], ["'garbage' is not a gpuwarden slice"]),
])
def test_bad_allocate_is_a_grpc_error_naming_why_and_applies_nothing(make_bed, ids: list[str],
                                                                     names: list[str]) -> None:
    bed = make_bed()
    bed.cluster.add(assigned_pod("two", [("c", [(A0, 1, 0), (A1, 1, 0)])]))
    with pytest.raises(grpc.RpcError) as err:
        allocate(bed, ids)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    for part in names:
        assert part in err.value.details()
    assert not any(bed.regions.glob("uid-*"))
    assert bind_phase(bed.cluster, "two") == "allocating"


def test_failed_annotation_write_undoes_the_region(make_bed) -> None:
    bed = make_bed()
    bed.cluster.add(assigned_pod("p", [("c", [(A0, 1000, 0)])]))
    bed.cluster.fail_pod_patch = "the API server said no"
    with pytest.raises(grpc.RpcError) as err:
        allocate(bed, [f"{A0}::0"])
    assert "pod team/p: cannot record the allocation (the API server said no)" in \
        err.value.details()
    assert not (bed.regions / "uid-p_c").exists()
    bed.cluster.fail_pod_patch = ""
    allocate(bed, [f"{A0}::0"])  # the kubelet retries: now it works
    assert (bed.regions / "uid-p_c" / "vgpu.region").exists()


def test_two_containers_in_one_request_are_applied_together(make_bed) -> None:
    bed = make_bed()
    bed.cluster.add(assigned_pod("p", [("a", [(A0, 1000, 0)]), ("b", [(A1, 2000, 0)])]))
    resp = allocate(bed, [f"{A0}::0"], [f"{A1}::0"])
    assert [c.envs["NVIDIA_VISIBLE_DEVICES"] for c in resp.container_responses] == [A0, A1]
    assert bind_phase(bed.cluster, "p") == "success"


def test_a_lagging_pod_cache_is_overlaid_with_own_allocations_and_refreshed_on_a_miss(
        make_bed) -> None:
    bed = make_bed()
    pod = bed.cluster.add(assigned_pod("p", [("a", [(A0, 1000, 0)]), ("b", [(A1, 2000, 0)])]))
    bed.cluster.cache = {pod.uid: pod}  # the watch never shows the plugin's own patches
    first = allocate(bed, [f"{A0}::0"]).container_responses[0]
    second = allocate(bed, [f"{A1}::0"]).container_responses[0]
    assert (first.envs["NVIDIA_VISIBLE_DEVICES"], second.envs["NVIDIA_VISIBLE_DEVICES"]) == \
        (A0, A1)  # not container a twice
    assert bed.cluster.fresh_lists == 0
    assert bind_phase(bed.cluster, "p") == "success"
    late = bed.cluster.add(assigned_pod("late", [("c", [(A0, 500, 0)])]))  # not cached yet
    allocate(bed, [f"{A0}::1"])
    assert bed.cluster.fresh_lists == 1 and bind_phase(bed.cluster, "late") == "success"
    assert late.uid not in bed.cluster.cache


def test_prestart_refuses_devices_the_kubelet_gave_another_pod(make_bed) -> None:
    bed = make_bed(pod_resources=True)
    podres = StandinPodResources(bed.dir / "podres.sock")
    try:
        bed.cluster.add(assigned_pod("p", [("c", [(A0, 1000, 0)])]))
        allocate(bed, [f"{A0}::0"])
        region = bed.regions / "uid-p_c" / "vgpu.region"
        with Region.open(region) as r:
            r.set_memory_limit(A0, 1)  # clobbered: PreStart writes the limit again
        podres.holdings = [("team", "p", "c", [f"{A0}::0"])]
        bed.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[f"{A0}::0"]),
                                   timeout=5)
        with Region.open(region) as r:
            assert r.snapshot().device(A0).limit_bytes == 1000 << 20
        podres.holdings = [("team", "other", "x", [f"{A0}::0"])]
        with pytest.raises(grpc.RpcError) as err:
            bed.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[f"{A0}::0"]),
                                       timeout=5)
        assert "set up for pod team/p container 'c'" in err.value.details()
        assert "gave them to pod team/other container 'x'" in err.value.details()
    finally:
        podres.stop()


def test_kubelet_restart_is_followed_by_registration_within_2s(make_bed) -> None:
    bed = make_bed()
    bed.kubelet.next_registration()
    bed.kubelet.stop(delete_plugin_sockets=True)
    new = StandinKubelet(bed.dir / "dp")
    t0 = time.monotonic()
    new.start()
    bed.kubelet = new
    at, req, _ = new.next_registration(timeout=5)
    assert at - t0 < 2.0, f"re-registered after {at - t0:.2f}s"
    assert req.endpoint == "gpuwarden.sock"
    _, stub = new.dial("gpuwarden.sock")
    assert stub.GetDevicePluginOptions(pb.Empty(), timeout=2).pre_start_required


def test_region_folders_of_gone_pods_are_removed_and_live_ones_kept(make_bed) -> None:
    bed = make_bed()
    gone = bed.cluster.add(assigned_pod("gone", [("c", [(A0, 1000, 0)])]))
    bed.cluster.add(assigned_pod("live", [("c", [(A1, 1000, 0)])]))
    allocate(bed, [f"{A0}::0"])
    allocate(bed, [f"{A1}::0"])
    del bed.cluster.pods[gone.uid]
    bed.plugin.maintain()
    assert sorted(p.name for p in bed.regions.glob("uid-*")) == ["uid-live_c"]
    assert (bed.regions / "node").is_dir() and (bed.regions / "ld.so.preload").is_file()
    assert [p.pod.name for p in bed.plugin.allocated.values()] == ["live"]


def test_stop_removes_the_socket(make_bed) -> None:
    bed = make_bed()
    sock = bed.dir / "dp" / "gpuwarden.sock"
    assert sock.exists()
    bed.plugin.stop()
    assert not sock.exists()
