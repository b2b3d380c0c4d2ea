"""The annotation codec: round trips, HAMi mirrors, and bad input named precisely."""

from __future__ import annotations

import json
import re

import pytest

from gpuwarden.annotations import (
    ASSIGNMENT,
    BIND_PHASE,
    HAMI_BIND_TIME,
    HAMI_DEVICES_TO_ALLOCATE,
    HAMI_NODE_REGISTER,
    NODE_GPUS,
    AnnotationError,
    ContainerAssignment,
    DeviceGrant,
    GpuDevice,
    NodeAllocations,
    NodeInventory,
    PodAssignment,
    Reservation,
    assignment_annotations,
    decode_allocated,
    decode_allocations,
    decode_assignment,
    decode_bind_phase,
    decode_hami_register,
    decode_node_gpus,
    encode_allocated,
    encode_allocations,
    encode_assignment,
    encode_hami_register,
    encode_node_gpus,
    node_inventory,
)

INVENTORY = NodeInventory(
    devices=(GpuDevice("GPU-aaaa", 0, 81559, 100, "NVIDIA H200", 0, True),
             GpuDevice("GPU-bbbb", 1, 81559, 100, "NVIDIA H200", 1, False)),
    split_count=10, updated="2026-12-01T06:00:00Z")

ASSIGNED = PodAssignment(
    node="node-1",
    containers=(
        ContainerAssignment("prep", (DeviceGrant("GPU-aaaa", 0, 1000, 0),), init=True),
        ContainerAssignment("c1", (DeviceGrant("GPU-aaaa", 0, 3000, 30),
                                   DeviceGrant("GPU-bbbb", 1, 3000, 30)),
                            priority=0, core_policy="force"),
    ),
    rule="training")


def test_node_gpus_round_trip_keeps_every_field() -> None:
    assert decode_node_gpus(encode_node_gpus(INVENTORY)) == INVENTORY


def test_node_gpus_uses_the_contract_keys() -> None:
    doc = json.loads(encode_node_gpus(INVENTORY))
    assert doc["version"] == 1 and doc["splitCount"] == 10
    assert doc["devices"][0] == {"uuid": "GPU-aaaa", "index": 0, "memoryMiB": 81559,
                                 "cores": 100, "type": "NVIDIA H200", "numa": 0, "healthy": True}


def test_hami_register_round_trip_reads_as_the_same_devices() -> None:
    back = decode_hami_register(encode_hami_register(INVENTORY))
    assert back.devices == INVENTORY.devices and back.split_count == 10


def test_node_inventory_prefers_ours_and_falls_back_to_hami() -> None:
    ours = NodeInventory(devices=INVENTORY.devices[:1], split_count=4)
    both = {NODE_GPUS: encode_node_gpus(ours), HAMI_NODE_REGISTER: encode_hami_register(INVENTORY)}
    assert node_inventory(both) == ours
    hami = node_inventory({HAMI_NODE_REGISTER: encode_hami_register(INVENTORY)})
    assert hami is not None and len(hami.devices) == 2
    assert node_inventory({"other": "x"}) is None


def test_assignment_round_trip_keeps_init_priority_and_policy() -> None:
    assert decode_assignment(encode_assignment(ASSIGNED)) == ASSIGNED
    assert ASSIGNED.container("c1") is ASSIGNED.containers[1]
    assert ASSIGNED.container("nope") is None


def test_assignment_annotations_mirror_hami_for_app_containers_only() -> None:
    out = assignment_annotations(ASSIGNED, "allocating", 1700000000)
    assert out[BIND_PHASE] == "allocating" and out[HAMI_BIND_TIME] == "1700000000"
    assert out[HAMI_DEVICES_TO_ALLOCATE] == "GPU-aaaa,NVIDIA,3000,30:GPU-bbbb,NVIDIA,3000,30:;"
    assert decode_assignment(out[ASSIGNMENT]) == ASSIGNED


@pytest.mark.parametrize(("text", "expected"), [
    ("{", "annotation gpuwarden.io/node-gpus: is not valid JSON"),
    ("[]", "annotation gpuwarden.io/node-gpus: must be a JSON object, got a list"),
    ('{"version": 2, "devices": []}', "at version: 2 is not a version this gpuwarden reads"),
    ('{"version": 1}', "the key 'devices' is missing"),
    ('{"version": 1, "devices": [{"uuid": "GPU-a", "index": 0, "memoryMiB": "lots"}]}',
     "at devices[0].memoryMiB: must be a whole number, got a string"),
    ('{"version": 1, "devices": [{"uuid": "GPU-a", "index": 0, "memoryMiB": 1, "cores": 101}]}',
     "at devices[0].cores: 101 is out of range 0..100"),
    ('{"version": 1, "devices": [{"uuid": "", "index": 0, "memoryMiB": 1}]}',
     "at devices[0].uuid: must not be empty"),
    ('{"version": 1, "devices": [{"uuid": "G", "index": 0, "memoryMiB": 1},'
     '{"uuid": "G", "index": 1, "memoryMiB": 1}]}', "at devices[1].uuid: G is listed twice"),
    ('{"version": 1, "devices": [], "splitCount": 0}', "at splitCount: 0 is out of range 1..1024"),
    ('{"version": 1, "devices": [{"uuid": "G", "index": 0, "memoryMiB": 1, "healthy": "yes"}]}',
     "at devices[0].healthy: must be true or false, got a string"),
])
def test_bad_node_gpus_names_annotation_place_and_valid_values(text: str, expected: str) -> None:
    with pytest.raises(AnnotationError, match=re.escape(expected)):
        decode_node_gpus(text)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"version": 1, "node": "n", "containers": [{"name": "c", "devices": [], '
     '"coresPolicy": "sometimes"}]}', "coresPolicy: 'sometimes' is not one of default | force"),
    ('{"version": 1, "node": "n", "containers": [{"name": "c", "devices": [{"uuid": "G", '
     '"index": 0, "memoryMiB": 1, "cores": -1}]}]}', "devices[0].cores: -1 is out of range"),
    ('{"version": 1, "node": "n", "containers": [{"name": "c", "devices": []},'
     '{"name": "c", "devices": []}]}', "containers[1].name: 'c' is empty or listed twice"),
    ('{"version": 1, "containers": []}', "the key 'node' is missing"),
])
def test_bad_assignment_names_the_container_and_field(text: str, expected: str) -> None:
    with pytest.raises(AnnotationError) as err:
        decode_assignment(text)
    assert str(err.value).startswith("annotation gpuwarden.io/assignment")
    assert expected in str(err.value)


def test_bad_hami_register_names_hami_annotation() -> None:
    with pytest.raises(AnnotationError, match=r"hami.io/node-nvidia-register at \[0\]\.devmem"):
        decode_hami_register('[{"id": "GPU-a", "devmem": -5}]')


def test_bind_phase_and_allocated_decode_or_refuse() -> None:
    assert decode_bind_phase({BIND_PHASE: "success"}) == "success"
    assert decode_bind_phase({}) is None
    with pytest.raises(AnnotationError, match=re.escape("'done' is not one of allocating")):
        decode_bind_phase({BIND_PHASE: "done"})
    assert decode_allocated(encode_allocated(["b", "a", "b"])) == ("a", "b")
    with pytest.raises(AnnotationError, match=r"gpuwarden.io/allocated at \[1\]"):
        decode_allocated('["a", 3]')


def test_allocations_ledger_round_trips_and_replaces_a_pods_entry() -> None:
    ledger = NodeAllocations().with_(Reservation("u2", "ns/b", 5, (("GPU-a", 100, 10, 1),)))
    ledger = ledger.with_(Reservation("u1", "ns/a", 6, (("GPU-a", 200, 0, 1),
                                                       ("GPU-b", 200, 0, 1))))
    ledger = ledger.with_(Reservation("u2", "ns/b", 7, (("GPU-b", 1, 1, 1),)))
    assert [r.uid for r in ledger.reservations] == ["u1", "u2"]
    assert decode_allocations(encode_allocations(ledger)) == ledger
    assert ledger.get("u2") is not None and ledger.get("u2").at == 7
    assert ledger.without("u1").get("u1") is None


def test_bad_allocations_ledger_names_the_entry() -> None:
    with pytest.raises(AnnotationError, match=re.escape(
            "gpuwarden.io/allocations at pods[0].gpus[0]: must be [uuid, memoryMiB, cores")):
        decode_allocations('{"version": 1, "pods": [{"uid": "u", "gpus": [["G", -1, 0, 1]]}]}')
