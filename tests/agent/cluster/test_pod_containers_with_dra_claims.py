"""Pods whose GPU comes through a DRA claim: the agent finds the claim's region and limits from
the record the DRA driver leaves in the claim's folder, and the container's workload asks for
what the claim consumed (so the policy and the audit treat it as a device-plugin container)."""

from __future__ import annotations

import pytest

from agent.pods import pod_containers
from gpuwarden.claims import (
    ClaimDevice,
    ClaimRecord,
    ClaimRecordError,
    decode_claim_record,
    encode_claim_record,
)
from policy.model import ResourceRequest

REC = ClaimRecord(namespace="ml", name="train-gpu-x7k2p", uid="cu1", request="gpu",
                  devices=(ClaimDevice("GPU-a", 0, 1024, 10),), priority=0)
INDEX = {("ml", "train-gpu-x7k2p"): [(REC, "/r/claims/cu1_gpu/vgpu.region")]}


def pod(resources_claims: list[dict], status: bool = True) -> dict:
    p = {"kind": "Pod",
         "metadata": {"name": "train", "namespace": "ml", "uid": "pu1"},
         "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                  "containers": [{"name": "main", "image": "i",
                                  "resources": {"claims": resources_claims}},
                                 {"name": "side", "image": "i"}]},
         "status": {"phase": "Running"}}
    if status:
        p["status"]["resourceClaimStatuses"] = [{"name": "gpu",
                                                 "resourceClaimName": "train-gpu-x7k2p"}]
    return p


def test_a_container_listing_a_prepared_claim_gets_its_region_and_limits() -> None:
    (pc,) = pod_containers(pod([{"name": "gpu"}]), {}, "/r", claims=INDEX)
    assert (pc.wid, pc.region, pc.devices) == ("pu1_main", "/r/claims/cu1_gpu/vgpu.region",
                                               ("GPU-a",))
    assert pc.workload.request == ResourceRequest(gpu=1, gpumem_mib=1024, gpucores=10,
                                                  priority=0)
    assert (pc.workload.namespace, pc.workload.name, pc.workload.container) == (
        "ml", "train", "main")


def test_a_claim_not_yet_named_in_the_pod_status_or_not_prepared_gives_nothing() -> None:
    assert pod_containers(pod([{"name": "gpu"}], status=False), {}, "/r", claims=INDEX) == []
    assert pod_containers(pod([{"name": "gpu"}]), {}, "/r", claims={}) == []


def test_a_container_naming_another_request_of_the_claim_is_not_given_this_one() -> None:
    assert pod_containers(pod([{"name": "gpu", "request": "other"}]), {}, "/r",
                          claims=INDEX) == []


def test_the_record_round_trips_and_a_bad_one_names_the_file_and_field() -> None:
    assert decode_claim_record(encode_claim_record(REC), "f") == REC
    text = encode_claim_record(REC).replace('"memoryMiB": 1024', '"memoryMiB": "1Gi"')
    with pytest.raises(ClaimRecordError, match=r"/x/claim.json: devices\[0\]: memoryMiB must "
                                               r"be a int, got '1Gi'"):
        decode_claim_record(text, "/x/claim.json")
