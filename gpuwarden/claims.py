"""The record the DRA driver leaves in each prepared claim unit's region folder
(`<regionRoot>/claims/<claim uid>_<request>/claim.json`), read by the agent to find which pod
containers a claim confines and with what limits: one definition for the writer and the reader.
Pure: text in, plain data out."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CLAIMS_DIR", "CLAIM_RECORD", "ClaimDevice", "ClaimRecord", "ClaimRecordError",
           "decode_claim_record", "encode_claim_record"]

CLAIMS_DIR = "claims"  # under regionRoot
CLAIM_RECORD = "claim.json"
VERSION = 1


class ClaimRecordError(ValueError):
    """A claim record that cannot be read; the message names the source and the problem."""


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    uuid: str
    index: int
    memory_mib: int
    cores: int


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    namespace: str
    name: str  # the ResourceClaim's name
    uid: str
    request: str  # the claim's request this unit serves
    devices: tuple[ClaimDevice, ...]
    priority: int = 1
    core_policy: str = "default"


def encode_claim_record(r: ClaimRecord) -> str:
    return json.dumps({
        "version": VERSION, "namespace": r.namespace, "name": r.name, "uid": r.uid,
        "request": r.request, "priority": r.priority, "corePolicy": r.core_policy,
        "devices": [{"uuid": d.uuid, "index": d.index, "memoryMiB": d.memory_mib,
                     "cores": d.cores} for d in r.devices]}, sort_keys=True) + "\n"


def _get(doc: Mapping[str, Any], key: str, kind: type, source: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ClaimRecordError(f"{source}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def decode_claim_record(text: str, source: str) -> ClaimRecord:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ClaimRecordError(f"{source}: not JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ClaimRecordError(f"{source}: not a version {VERSION} claim record")
    raw: Sequence[Any] = _get(doc, "devices", list, source)
    devices = []
    for i, d in enumerate(raw):
        where = f"{source}: devices[{i}]"
        if not isinstance(d, dict):
            raise ClaimRecordError(f"{where} must be an object")
        devices.append(ClaimDevice(_get(d, "uuid", str, where), _get(d, "index", int, where),
                                   _get(d, "memoryMiB", int, where), _get(d, "cores", int, where)))
    if not devices:
        raise ClaimRecordError(f"{source}: devices is empty")
    return ClaimRecord(namespace=_get(doc, "namespace", str, source),
                       name=_get(doc, "name", str, source), uid=_get(doc, "uid", str, source),
                       request=_get(doc, "request", str, source), devices=tuple(devices),
                       priority=_get(doc, "priority", int, source),
                       core_policy=_get(doc, "corePolicy", str, source))
