"""A throw-away Kubernetes cluster on 127.0.0.1 for the tests marked `k8s` (and benchmarks).

Built from the binaries in the folder KUBEBUILDER_ASSETS names (kube-apiserver, kube-scheduler,
kube-controller-manager, kubelet, containerd 2 and its shim, ctr), plus Debian's etcd, runc and
CNI plugins: `ControlPlane` (etcd, apiserver, scheduler, controller-manager, on free ports) and
`Node` (containerd + kubelet, CDI enabled, pods on a bridge of the run's own).  Everything a run
starts lives in one run folder: certificates, configs, data, logs of every component; stopping
kills what was started, unmounts what was mounted under the folder, deletes the bridge and the
folder.  A run killed before it could stop is cleaned by the next one.

It must not touch anything it did not create: other runs' folders while their owner lives, the
host's own containerd, any network but 127.0.0.1 and the run's bridge.  Only one kubelet runs
per machine at a time (its device-plugin folder is fixed): `Node` holds a file lock while up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from testbed.assets import Assets, assets_unavailable_reason
from testbed.procs import StartupError, wait_for

if TYPE_CHECKING:
    from testbed.controlplane import ControlPlane
    from testbed.node import Node

# The cluster classes need the `kubernetes` client; they load on first use, so that importing
# this package for `wait_for` or the assets check (every conftest does) works on a host without
# it (the GPU host runs the `gpu` tests with only what they need).
_LAZY = {"ControlPlane": "testbed.controlplane", "Node": "testbed.node"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")

__all__ = ["Assets", "ControlPlane", "Node", "StartupError", "assets_unavailable_reason",
           "wait_for"]
