"""The kubelet's DRA APIs, compiled from this folder's .proto files at first use (as the device
plugin's are): `dra()` the DRAPlugin v1 service, `registration()` the plugin registration
service."""

from __future__ import annotations

import functools
from pathlib import Path

from deviceplugin.api import Api, compile_proto

__all__ = ["API_DIR", "dra", "registration"]

API_DIR = Path(__file__).resolve().parent


@functools.cache
def dra() -> Api:
    return compile_proto("draplugin.proto", API_DIR)


@functools.cache
def registration() -> Api:
    return compile_proto("pluginregistration.proto", API_DIR)
