"""deploy/ rendered by `kubectl kustomize`, as a list of objects (shared by the deploy tests)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


@functools.cache
def rendered_text() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise AssertionError("kubectl is not on PATH (scripts/setup.sh checks for it); the "
                             "deploy tests render deploy/ with `kubectl kustomize`")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"kubectl kustomize deploy/ failed:\n{out.stderr}")
    return out.stdout


def rendered() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered_text()) if d]


def find(kind: str, name: str) -> dict[str, Any]:
    """The object `name`, or `name-<hash>` for a generated ConfigMap."""
    for d in rendered():
        actual = d["metadata"]["name"]
        if d["kind"] == kind and (actual == name or (
                kind == "ConfigMap" and actual.rpartition("-")[0] == name)):
            return d
    raise AssertionError(f"deploy/ renders no {kind} {name}")
