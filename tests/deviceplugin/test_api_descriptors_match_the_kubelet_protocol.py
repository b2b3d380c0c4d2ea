"""The compiled .proto files speak the kubelet's wire protocol: package, services, methods,
message and field names, numbers and types as the kubelet's v1beta1 and PodResources v1 APIs."""

from __future__ import annotations

from typing import Any

import pytest

from deviceplugin.api import device_plugin, pod_resources

F = Any
# message -> {field: (number, label, type)}; label "r" repeated, "1" singular; type a scalar
# name or the message name
V1BETA1: dict[str, dict[str, tuple[int, str, str]]] = {
    "DevicePluginOptions": {"pre_start_required": (1, "1", "bool"),
                            "get_preferred_allocation_available": (2, "1", "bool")},
    "RegisterRequest": {"version": (1, "1", "string"), "endpoint": (2, "1", "string"),
                        "resource_name": (3, "1", "string"),
                        "options": (4, "1", "DevicePluginOptions")},
    "Empty": {},
    "ListAndWatchResponse": {"devices": (1, "r", "Device")},
    "TopologyInfo": {"nodes": (1, "r", "NUMANode")},
    "NUMANode": {"ID": (1, "1", "int64")},
    "Device": {"ID": (1, "1", "string"), "health": (2, "1", "string"),
               "topology": (3, "1", "TopologyInfo")},
    "PreStartContainerRequest": {"devices_ids": (1, "r", "string")},
    "PreStartContainerResponse": {},
    "PreferredAllocationRequest": {
        "container_requests": (1, "r", "ContainerPreferredAllocationRequest")},
    "ContainerPreferredAllocationRequest": {"available_deviceIDs": (1, "r", "string"),
                                            "must_include_deviceIDs": (2, "r", "string"),
                                            "allocation_size": (3, "1", "int32")},
    "PreferredAllocationResponse": {
        "container_responses": (1, "r", "ContainerPreferredAllocationResponse")},
    "ContainerPreferredAllocationResponse": {"deviceIDs": (1, "r", "string")},
    "AllocateRequest": {"container_requests": (1, "r", "ContainerAllocateRequest")},
    "ContainerAllocateRequest": {"devices_ids": (1, "r", "string")},
    "AllocateResponse": {"container_responses": (1, "r", "ContainerAllocateResponse")},
    "ContainerAllocateResponse": {"envs": (1, "r", "EnvsEntry"), "mounts": (2, "r", "Mount"),
                                  "devices": (3, "r", "DeviceSpec"),
                                  "annotations": (4, "r", "AnnotationsEntry"),
                                  "cdi_devices": (5, "r", "CDIDevice")},
    "Mount": {"container_path": (1, "1", "string"), "host_path": (2, "1", "string"),
              "read_only": (3, "1", "bool")},
    "DeviceSpec": {"container_path": (1, "1", "string"), "host_path": (2, "1", "string"),
                   "permissions": (3, "1", "string")},
    "CDIDevice": {"name": (1, "1", "string")},
}
PODRESOURCES_V1: dict[str, dict[str, tuple[int, str, str]]] = {
    "ListPodResourcesRequest": {},
    "ListPodResourcesResponse": {"pod_resources": (1, "r", "PodResources")},
    "PodResources": {"name": (1, "1", "string"), "namespace": (2, "1", "string"),
                     "containers": (3, "r", "ContainerResources")},
    "ContainerResources": {"name": (1, "1", "string"), "devices": (2, "r", "ContainerDevices")},
    "ContainerDevices": {"resource_name": (1, "1", "string"),
                         "device_ids": (2, "r", "string")},
}
SCALARS = {8: "bool", 9: "string", 3: "int64", 5: "int32"}


def _shape(field: F) -> tuple[int, str, str]:
    repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == 3
    kind = field.message_type.name if field.type == 11 else SCALARS[field.type]
    return (field.number, "r" if repeated else "1", kind)


@pytest.mark.parametrize(("api", "package", "want"), [
    (device_plugin, "v1beta1", V1BETA1), (pod_resources, "v1", PODRESOURCES_V1)])
def test_every_message_has_the_kubelets_fields(api: Any, package: str,
                                               want: dict[str, dict[str, tuple[int, str, str]]],
                                               ) -> None:
    desc = api().pb.DESCRIPTOR
    assert desc.package == package
    assert set(desc.message_types_by_name) == set(want)
    for name, fields in want.items():
        got = {f.name: _shape(f) for f in desc.message_types_by_name[name].fields}
        assert got == fields, name


def test_map_fields_are_string_maps() -> None:
    msg = device_plugin().pb.DESCRIPTOR.message_types_by_name["ContainerAllocateResponse"]
    for name in ("envs", "annotations"):
        entry = msg.fields_by_name[name].message_type
        assert entry.GetOptions().map_entry
        assert [(f.name, f.number, f.type) for f in entry.fields] == [("key", 1, 9),
                                                                      ("value", 2, 9)]


def test_services_and_methods_are_the_kubelets() -> None:
    desc = device_plugin().pb.DESCRIPTOR
    reg = desc.services_by_name["Registration"]
    assert reg.full_name == "v1beta1.Registration"
    assert [(m.name, m.input_type.name, m.output_type.name) for m in reg.methods] == [
        ("Register", "RegisterRequest", "Empty")]
    dp = desc.services_by_name["DevicePlugin"]
    assert dp.full_name == "v1beta1.DevicePlugin"
    got = {m.name: (m.input_type.name, m.output_type.name, m.server_streaming)
           for m in dp.methods}
    assert got == {
        "GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
        "ListAndWatch": ("Empty", "ListAndWatchResponse", True),
        "GetPreferredAllocation": ("PreferredAllocationRequest",
                                   "PreferredAllocationResponse", False),
        "Allocate": ("AllocateRequest", "AllocateResponse", False),
        "PreStartContainer": ("PreStartContainerRequest", "PreStartContainerResponse", False),
    }
    lister = pod_resources().pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert lister.full_name == "v1.PodResourcesLister"
    assert [m.name for m in lister.methods] == ["List"]
