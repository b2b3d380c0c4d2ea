"""The kubelet's gRPC APIs, compiled from this folder's .proto files at first use.

`device_plugin()` gives the v1beta1 device plugin API (messages, stubs, servicers),
`pod_resources()` the PodResources v1 `List`. Compilation uses grpcio-tools in memory (no
generated code in the tree) and happens once per process.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

__all__ = ["API_DIR", "Api", "compile_proto", "device_plugin", "pod_resources"]

API_DIR = Path(__file__).resolve().parent


class Api(NamedTuple):
    pb: ModuleType  # messages
    grpc: ModuleType  # stubs, servicers, add_*_to_server


def compile_proto(proto: str, folder: Path = API_DIR) -> Api:
    """Messages and services of `folder/proto` (each .proto file name must be unique in the
    process: protobuf's pool knows files by name)."""
    import grpc

    path = str(folder)
    sys.path.insert(0, path)  # grpcio-tools finds .proto files on sys.path
    try:
        pb, services = grpc.protos_and_services(proto)
    finally:
        sys.path.remove(path)
    return Api(pb, services)


@functools.cache
def device_plugin() -> Api:
    return compile_proto("deviceplugin.proto")


@functools.cache
def pod_resources() -> Api:
    return compile_proto("podresources.proto")
