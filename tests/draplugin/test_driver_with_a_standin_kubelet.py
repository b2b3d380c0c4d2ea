"""The DRA driver on unix sockets, dialled as the kubelet does (plugin watcher: GetInfo then
NotifyRegistrationStatus on the registration socket; then DRAPlugin v1 on the endpoint it
named), with fake GPUs and an in-memory API server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from fakes import (
    NODE,
    UUIDS,
    FakeInventory,
    FakeResources,
    claim,
    result,
    short_dir,
    two_gpus,
)
from testbed import wait_for

from draplugin.api import dra, registration
from draplugin.server import DraDriver, DraOptions
from gpuwarden.claims import decode_claim_record
from gpuwarden.config import Settings
from libvgpu.region import Region

MIB = 1 << 20


class Bed:
    def __init__(self, d: Path, resources: FakeResources) -> None:
        self.dir, self.resources = d, resources
        self.settings = Settings(region_root=str(d / "regions"))
        self.opts = DraOptions(node=NODE, kubelet_root=d / "kubelet", cdi_dir=d / "cdi",
                               state_dir=d / "state", libvgpu="/opt/libvgpu.so",
                               health_seconds=0.05, resync_seconds=0.05)
        self.driver: DraDriver | None = None

    def start(self) -> DraDriver:
        self.driver = DraDriver(self.settings, self.opts, two_gpus(), self.resources,
                                log=lambda m: None).start()
        return self.driver

    def register(self) -> Any:
        """What the kubelet's plugin watcher does with a new registration socket."""
        api = registration()
        with grpc.insecure_channel(f"unix://{self.opts.registry_socket}") as ch:
            stub = api.grpc.RegistrationStub(ch)
            info = stub.GetInfo(api.pb.InfoRequest(), timeout=5)
            stub.NotifyRegistrationStatus(api.pb.RegistrationStatus(plugin_registered=True),
                                          timeout=5)
        return info

    def call(self, method: str, *claims: tuple[str, str, str]) -> Any:
        api = dra()
        request = getattr(api.pb, f"{method}Request")(
            claims=[api.pb.Claim(namespace=ns, name=n, uid=u) for ns, n, u in claims])
        with grpc.insecure_channel(f"unix://{self.opts.plugin_socket}") as ch:
            return getattr(api.grpc.DRAPluginStub(ch), method)(request, timeout=5)


@pytest.fixture
def bed() -> Iterator[Callable[[], Bed]]:
    made: list[Bed] = []

    def make() -> Bed:
        b = Bed(short_dir(), FakeResources())
        made.append(b)
        return b

    yield make
    for b in made:
        if b.driver is not None:
            b.driver.stop()
        shutil.rmtree(b.dir, ignore_errors=True)


def test_registers_as_a_v1_dra_plugin_and_publishes_its_slice_only_after(bed) -> None:
    b = bed()
    b.start()
    assert b.opts.registry_socket.is_socket()
    assert b.resources.slices == {}  # the kubelet would delete a slice made before it knew us
    info = b.register()
    assert (info.type, info.name, info.endpoint, list(info.supported_versions)) == (
        "DRAPlugin", "gpuwarden.io", str(b.opts.plugin_socket), ["v1.DRAPlugin"])
    sl = wait_for(lambda: b.resources.slices.get(f"{NODE}-gpuwarden-io"), 5, "the slice")
    assert [d["attributes"]["uuid"]["string"] for d in sl["spec"]["devices"]] == list(UUIDS)


def test_a_deleted_slice_is_published_again(bed) -> None:
    b = bed()
    b.start()
    b.register()
    wait_for(lambda: b.resources.slices, 5, "the slice")
    b.resources.slices.clear()  # what the kubelet does when it starts
    sl = wait_for(lambda: b.resources.slices.get(f"{NODE}-gpuwarden-io"), 5, "the slice again")
    assert sl["spec"]["pool"]["generation"] == 0


def test_prepare_writes_region_and_cdi_spec_and_is_idempotent(bed) -> None:
    b = bed()
    b.resources.claims[("ns", "c1")] = claim("c1", "uid-1", [result("gpu-1", "1Gi", "10")])
    b.start()
    resp = b.call("NodePrepareResources", ("ns", "c1", "uid-1"))
    r = resp.claims["uid-1"]
    assert r.error == ""
    (dev,) = r.devices
    assert (list(dev.request_names), dev.pool_name, dev.device_name, list(dev.cdi_device_ids)) \
        == (["gpu"], NODE, "gpu-1", ["gpuwarden.io/claim=uid-1_gpu"])
    region = b.dir / "regions" / "claims" / "uid-1_gpu" / "vgpu.region"
    with Region.open(region) as reg:
        d = reg.snapshot().device(UUIDS[1])
    assert d.limit_bytes == 1024 * MIB
    record = decode_claim_record((region.parent / "claim.json").read_text(), "claim.json")
    assert (record.namespace, record.name, record.request, record.devices[0].memory_mib) == (
        "ns", "c1", "gpu", 1024)
    spec = json.loads((b.opts.cdi_dir / "gpuwarden.io-claim_uid-1.json").read_text())
    assert spec["devices"][0]["name"] == "uid-1_gpu"
    # the kubelet may call again (e.g. after its own restart): the same answer, nothing new
    b.resources.claims.clear()
    again = b.call("NodePrepareResources", ("ns", "c1", "uid-1"))
    assert again.claims["uid-1"] == r


def test_a_restarted_driver_keeps_prepared_claims_and_unprepare_removes_them(bed) -> None:
    b = bed()
    b.resources.claims[("ns", "c1")] = claim("c1", "uid-1", [result()])
    driver = b.start()
    first = b.call("NodePrepareResources", ("ns", "c1", "uid-1")).claims["uid-1"]
    driver.stop()
    b.resources.claims.clear()  # the restarted driver must not need the API for it
    b.start()
    assert b.call("NodePrepareResources", ("ns", "c1", "uid-1")).claims["uid-1"] == first
    out = b.call("NodeUnprepareResources", ("ns", "c1", "uid-1"))
    assert out.claims["uid-1"].error == ""
    assert not (b.dir / "regions" / "claims" / "uid-1_gpu").exists()
    assert not (b.opts.cdi_dir / "gpuwarden.io-claim_uid-1.json").exists()
    # unpreparing again (or a claim never prepared here) succeeds
    assert b.call("NodeUnprepareResources", ("ns", "c1", "uid-1")).claims["uid-1"].error == ""


def test_a_claim_that_cannot_be_prepared_gets_an_error_naming_it_and_leaves_nothing(bed) -> None:
    b = bed()
    b.resources.claims[("ns", "bad")] = claim("bad", "uid-2", [result("gpu-9")])
    b.start()
    resp = b.call("NodePrepareResources", ("ns", "bad", "uid-2"), ("ns", "gone", "uid-3"))
    assert "claim ns/bad request 'gpu' was given device gpu-9" in resp.claims["uid-2"].error
    assert resp.claims["uid-3"].error == "claim ns/gone does not exist"
    assert list((b.dir / "regions" / "claims").iterdir()) == []
    assert not list(b.opts.cdi_dir.glob("*.json")) if b.opts.cdi_dir.exists() else True


def test_a_claim_made_again_under_the_same_name_is_not_mistaken_for_the_old(bed) -> None:
    b = bed()
    b.resources.claims[("ns", "c")] = claim("c", "new-uid", [result()])
    b.start()
    resp = b.call("NodePrepareResources", ("ns", "c", "old-uid"))
    assert "has uid new-uid, not old-uid" in resp.claims["old-uid"].error


def test_stop_removes_the_sockets(bed) -> None:
    b = bed()
    driver = b.start()
    driver.stop()
    assert not b.opts.registry_socket.exists() and not b.opts.plugin_socket.exists()


def test_a_gpu_turning_unhealthy_is_republished_with_a_new_pool_generation(bed) -> None:
    b = bed()
    driver = b.start()
    b.register()
    name = f"{NODE}-gpuwarden-io"
    wait_for(lambda: b.resources.slices.get(name), 5, "the slice")
    inv = driver.inventory
    assert isinstance(inv, FakeInventory)
    inv.gpus = (inv.gpus[0], replace(inv.gpus[1], healthy=False, why_unhealthy="XID 79"))

    def republished() -> dict | None:
        s = b.resources.slices[name]
        return s if s["spec"]["devices"][1]["attributes"]["healthy"] == {"bool": False} else None

    sl = wait_for(republished, 5, "the slice with gpu-1 unhealthy")
    assert sl["spec"]["pool"]["generation"] == 1
    assert sl["spec"]["devices"][0]["attributes"]["healthy"] == {"bool": True}
    # a claim on the unhealthy GPU is refused, naming the GPU and why
    b.resources.claims[("ns", "c")] = claim("c", "u", [result("gpu-1")])
    err = b.call("NodePrepareResources", ("ns", "c", "u")).claims["u"].error
    assert f"device gpu-1 ({UUIDS[1]}) is unhealthy: XID 79" in err


def test_a_prepared_claim_whose_files_are_gone_is_set_up_again(bed) -> None:
    b = bed()
    b.resources.claims[("ns", "c1")] = claim("c1", "uid-1", [result()])
    b.start()
    first = b.call("NodePrepareResources", ("ns", "c1", "uid-1")).claims["uid-1"]
    cdi = b.opts.cdi_dir / "gpuwarden.io-claim_uid-1.json"
    cdi.unlink()  # a reboot emptied the CDI folder (a tmpfs); the checkpoint survived
    again = b.call("NodePrepareResources", ("ns", "c1", "uid-1")).claims["uid-1"]
    assert again == first and cdi.exists()
