"""Pure device bookkeeping: slice IDs derived from UUIDs only, bad IDs named, the node inventory
with memory after deviceMemoryScaling."""

from __future__ import annotations

import pytest
from standin import UUIDS, two_gpus

from deviceplugin.devices import (
    DeviceIdError,
    PhysicalGpu,
    advertise,
    gpus_of,
    node_inventory,
    parse_slice_id,
    slice_ids,
    xid_is_fatal,
)
from gpuwarden.annotations import decode_node_gpus, encode_node_gpus
from gpuwarden.config import Settings


def test_each_gpu_is_split_count_slices_with_ids_from_its_uuid_only() -> None:
    gpus = two_gpus().gpus
    first = advertise(gpus, 10)
    again = advertise(tuple(reversed(gpus)), 10)  # NVML order does not matter
    assert first == again
    assert len(first) == 20
    assert [s.id for s in first[:2]] == [f"{UUIDS[0]}::0", f"{UUIDS[0]}::1"]
    assert {s.numa for s in first if s.uuid == UUIDS[1]} == {1}
    assert slice_ids(UUIDS[0], 3) == tuple(f"{UUIDS[0]}::{k}" for k in range(3))


@pytest.mark.parametrize(("device_id", "names"), [
    ("GPU-x", ["'GPU-x'", "<GPU UUID>::<n>"]),
    ("GPU-x::", ["'GPU-x::'", "not a gpuwarden slice"]),
    ("::3", ["'::3'"]),
    ("GPU-x::a", ["'GPU-x::a'"]),
    ("GPU-other::1", ["GPU-other", "which this node does not have", UUIDS[0]]),
])
def test_bad_device_id_is_named(device_id: str, names: list[str]) -> None:
    with pytest.raises(DeviceIdError) as err:
        parse_slice_id(device_id, UUIDS)
    for part in names:
        assert part in str(err.value)


def test_gpus_of_keeps_order_and_folds_slices_of_one_gpu() -> None:
    ids = [f"{UUIDS[1]}::4", f"{UUIDS[0]}::0", f"{UUIDS[1]}::5"]
    assert gpus_of(ids, UUIDS) == (UUIDS[1], UUIDS[0])


def test_inventory_scales_memory_and_keeps_health_and_numa() -> None:
    gpus = (PhysicalGpu(UUIDS[0], 0, 81559, "NVIDIA H200", 1, healthy=False),)
    inv = node_inventory(gpus, Settings(device_memory_scaling=1.5, device_split_count=4), "t")
    (d,) = inv.devices
    assert (d.memory_mib, d.numa, d.healthy, d.type, d.cores) == (122338, 1, False,
                                                                  "NVIDIA H200", 100)
    assert inv.split_count == 4
    assert decode_node_gpus(encode_node_gpus(inv)) == inv


@pytest.mark.parametrize(("xid", "fatal"), [(13, False), (31, False), (43, False), (48, True),
                                            (79, True), (94, True)])
def test_application_xids_leave_the_gpu_healthy(xid: int, fatal: bool) -> None:
    assert xid_is_fatal(xid) is fatal
