"""The prepared claims, kept in one JSON file so that a restarted driver answers a repeated
NodePrepareResources with what it set up before and can undo it on NodeUnprepareResources.
Written whole to a temporary file and renamed (a crash leaves the old or the new file)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["Checkpoint", "PreparedClaim", "PreparedDevice"]

VERSION = 1


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    request: str
    pool: str
    device: str
    cdi_id: str


@dataclass(frozen=True, slots=True)
class PreparedClaim:
    uid: str
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]
    region_dirs: tuple[str, ...]
    cdi_file: str


class Checkpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.claims: dict[str, PreparedClaim] = {}

    def load(self) -> Checkpoint:
        """Read the file (a missing file is an empty checkpoint); ValueError naming the file
        when it is not one of ours."""
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return self
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"{self.path}: cannot read the checkpoint of prepared claims "
                             f"({err}); move it away to start empty (prepared claims are then "
                             "forgotten)") from None
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise ValueError(f"{self.path}: not a version {VERSION} checkpoint of gpuwarden's "
                             "DRA driver")
        for raw in doc.get("claims", []):
            c = PreparedClaim(
                uid=raw["uid"], namespace=raw["namespace"], name=raw["name"],
                devices=tuple(PreparedDevice(**d) for d in raw["devices"]),
                region_dirs=tuple(raw["region_dirs"]), cdi_file=raw["cdi_file"])
            self.claims[c.uid] = c
        return self

    def _write(self) -> None:
        doc: dict[str, Any] = {"version": VERSION,
                               "claims": [asdict(c) for c in self.claims.values()]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def put(self, claim: PreparedClaim) -> None:
        self.claims[claim.uid] = claim
        self._write()

    def drop(self, uid: str) -> None:
        if self.claims.pop(uid, None) is not None:
            self._write()
