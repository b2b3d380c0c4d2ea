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

from testbed.assets import Assets, assets_unavailable_reason
from testbed.controlplane import ControlPlane
from testbed.node import Node
from testbed.procs import StartupError, wait_for

__all__ = ["Assets", "ControlPlane", "Node", "StartupError", "assets_unavailable_reason",
           "wait_for"]
