"""Where the test bed's binaries are: KUBEBUILDER_ASSETS for Kubernetes and containerd 2,
PATH (Debian's packages) for etcd, runc, the CNI plugins and openssl."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSET_BINARIES", "CNI_BIN_DIR", "Assets", "assets_unavailable_reason", "find_assets"]

ASSET_BINARIES = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet",
                  "containerd", "containerd-shim-runc-v2", "ctr")
HOST_BINARIES = ("etcd", "runc", "openssl")
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
SETUP_HINT = "scripts/setup.sh unpacks them into .cache/k8s/v1.36.2 and scripts/test.sh sets it"


@dataclass(frozen=True)
class Assets:
    """Absolute paths of every program the test bed runs."""

    folder: Path
    etcd: Path
    runc: Path
    openssl: Path

    def bin(self, name: str) -> Path:
        """One of ASSET_BINARIES, from the assets folder."""
        if name not in ASSET_BINARIES:
            raise KeyError(f"{name!r} is not a test-bed asset; valid: {', '.join(ASSET_BINARIES)}")
        return self.folder / name


def _problem(env: dict[str, str]) -> tuple[str | None, Assets | None]:
    raw = env.get("KUBEBUILDER_ASSETS", "")
    if not raw:
        return f"KUBEBUILDER_ASSETS is not set ({SETUP_HINT})", None
    folder = Path(raw)
    missing = [b for b in ASSET_BINARIES if not os.access(folder / b, os.X_OK)]
    if missing:
        return (f"KUBEBUILDER_ASSETS={raw} lacks executable {', '.join(missing)} "
                f"({SETUP_HINT})"), None
    host: dict[str, Path] = {}
    for name in HOST_BINARIES:
        found = shutil.which(name) or (f"/usr/sbin/{name}" if os.access(f"/usr/sbin/{name}",
                                                                       os.X_OK) else None)
        if not found:
            return f"{name} is not on PATH (scripts/setup.sh installs it)", None
        host[name] = Path(found)
    cni_missing = [p for p in CNI_PLUGINS if not os.access(CNI_BIN_DIR / p, os.X_OK)]
    if cni_missing:
        return (f"CNI plugins {', '.join(cni_missing)} are missing from {CNI_BIN_DIR} "
                "(scripts/setup.sh installs containernetworking-plugins)"), None
    return None, Assets(folder=folder.resolve(), etcd=host["etcd"], runc=host["runc"],
                        openssl=host["openssl"])


def assets_unavailable_reason(env: dict[str, str] | None = None) -> str | None:
    """Why the test bed cannot run here, or None when it can (root and every binary found)."""
    if os.geteuid() != 0:
        return "the Kubernetes test bed needs root (kubelet, containerd, mounts, a bridge)"
    return _problem(dict(os.environ) if env is None else env)[0]


def find_assets(env: dict[str, str] | None = None) -> Assets:
    """The binaries, or RuntimeError saying which one is missing and how to get it."""
    problem, assets = _problem(dict(os.environ) if env is None else env)
    if assets is None:
        raise RuntimeError(problem)
    return assets
