"""In-memory stand-ins for the DRA driver's edges: the GPUs, the API server's ResourceClaims
and ResourceSlices, and claims as the scheduler allocates them."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deviceplugin.devices import PhysicalGpu

UUIDS = ("GPU-00000000-0000-0000-0000-0000000000d0", "GPU-00000000-0000-0000-0000-0000000000d1")
NODE = "node-a"


def short_dir(prefix: str = "gwdra-") -> Path:
    """A folder with a short path: unix socket paths are limited to 107 bytes."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


class FakeInventory:
    def __init__(self, gpus: Sequence[PhysicalGpu]) -> None:
        self.gpus = tuple(gpus)

    def read(self) -> tuple[PhysicalGpu, ...]:
        return self.gpus

    def wait_xid(self, timeout_ms: int) -> bool:
        return False


def two_gpus() -> FakeInventory:
    return FakeInventory([PhysicalGpu(UUIDS[0], 0, 81920, "NVIDIA H200", 0),
                          PhysicalGpu(UUIDS[1], 1, 81920, "NVIDIA H200", 1)])


@dataclass
class FakeResources:
    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: int = 0
    version: int = 0

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        c = self.claims.get((namespace, name))
        return copy.deepcopy(c) if c is not None else None

    def get_slice(self, name: str) -> dict[str, Any] | None:
        s = self.slices.get(name)
        return copy.deepcopy(s) if s is not None else None

    def put_slice(self, body: Mapping[str, Any], resource_version: str | None) -> None:
        name = body["metadata"]["name"]
        have = self.slices.get(name)
        if (resource_version is None) != (have is None) or (
                have is not None and have["metadata"]["resourceVersion"] != resource_version):
            raise RuntimeError(f"conflict writing slice {name}")
        self.version += 1
        self.writes += 1
        new = copy.deepcopy(dict(body))
        new["metadata"] = {**new["metadata"], "resourceVersion": str(self.version)}
        self.slices[name] = new


def claim(name: str, uid: str, results: Sequence[Mapping[str, Any]],
          config: Sequence[Mapping[str, Any]] = (), namespace: str = "ns") -> dict[str, Any]:
    """A ResourceClaim allocated as the scheduler writes it."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "status": {"allocation": {"devices": {"results": list(results),
                                                  "config": list(config)}}}}


def result(device: str = "gpu-0", memory: str | None = "1Gi", cores: str | None = "10",
           request: str = "gpu", pool: str = NODE, share: str = "s1",
           driver: str = "gpuwarden.io") -> dict[str, Any]:
    used = {k: v for k, v in (("memory", memory), ("cores", cores)) if v is not None}
    out: dict[str, Any] = {"request": request, "driver": driver, "pool": pool,
                           "device": device, "shareID": share}
    if used:
        out["consumedCapacity"] = used
    return out
