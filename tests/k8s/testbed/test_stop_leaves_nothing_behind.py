"""Stopping the test bed ends every process it started and leaves no mount, bridge, network
namespace or folder; a run killed before it could stop is cleaned by the next one; start-up
failures name the component and show its log; a second kubelet is refused with the holder's pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import IPRoute
from testbed import ControlPlane, StartupError, images
from testbed.kube import core, pod_manifest, wait_for, wait_pod_phase
from testbed.node import KubeletLock
from testbed.runfolder import mounts_under, pids_naming, pod_cgroups

pytestmark = pytest.mark.k8s

TESTS = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _links(name: str) -> list[int]:
    with IPRoute() as ipr:
        return list(ipr.link_lookup(ifname=name))


def test_stopped_control_plane_leaves_no_process_mount_or_folder() -> None:
    cp = ControlPlane.start()
    pids = [c.pid for c in cp.components.values()]
    assert len(pids) == 4 and all(pid is not None and _alive(pid) for pid in pids)
    assert mounts_under(cp.folder)  # etcd's tmpfs
    cp.stop()
    assert not [pid for pid in pids if pid is not None and _alive(pid)]
    assert not mounts_under(cp.folder)
    assert not cp.folder.exists()


def test_stopped_node_leaves_no_process_mount_bridge_or_netns(
        k8s_api, k8s_node, k8s_namespace) -> None:
    pod = pod_manifest("sleeper", images.BUSYBOX_IMAGE, ["sleep", "3600"],
                       node_name=k8s_node.name)
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    running = wait_pod_phase(k8s_api, k8s_namespace, "sleeper", ("Running",))
    assert running.status.pod_ip.startswith("10.213.")
    folder = k8s_node.folder
    shims = pids_naming(str(folder))  # containerd's shims name the node's folder
    containers = _container_pids(k8s_node)  # the pod's pause and sleep processes
    daemons = [c.pid for c in k8s_node.components.values()]
    netns = [m for m in mounts_under(folder) if "/netns/" in m]
    cgroups = pod_cgroups([running.metadata.uid])
    assert shims and len(containers) >= 2 and netns and _links(k8s_node.bridge) and cgroups
    try:
        k8s_node.stop()
        assert not [p for p in [*shims, *containers, *daemons] if p is not None and _alive(p)]
        assert not mounts_under(folder)
        assert not [c for c in cgroups if c.exists()]
        assert not _links(k8s_node.bridge)
        assert not folder.exists()
    finally:
        k8s_node.up()  # later tests share the node


def _container_pids(node) -> list[int]:
    root = node.runc_root / "k8s.io"
    listed = subprocess.run([str(node.cp.assets.runc), "--root", str(root), "list", "-f",
                             "json"], capture_output=True, text=True, check=True)
    return [c["pid"] for c in json.loads(listed.stdout or "[]") if c["status"] == "running"]


CRASH = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from testbed import ControlPlane, Node, images
from testbed.kube import core, create_namespace, pod_manifest, wait_pod_phase
cp = ControlPlane.start()
node = Node.start(cp, lock_timeout=240)
ns = create_namespace(node.api)
core(node.api).create_namespaced_pod(ns, pod_manifest(
    "orphan", images.BUSYBOX_IMAGE, ["sleep", "3600"], node_name=node.name))
uid = wait_pod_phase(node.api, ns, "orphan", ("Running",)).metadata.uid
pids = [c.pid for c in [*cp.components.values(), *node.components.values()]]
print(cp.folder, node.bridge, uid, *pids, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_run_is_cleaned_by_the_next(k8s_node, tmp_path: Path) -> None:
    """A session killed with its cluster, node and a pod up leaves them running; the next node
    to start cleans all of it (the killed run's processes, containers, cgroups, mounts, bridge
    and folder) before it comes up."""
    k8s_node.stop()  # the killed run needs the kubelet lock
    try:
        script = tmp_path / "crash.py"
        script.write_text(CRASH.format(tests=str(TESTS)))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == -signal.SIGKILL, done.stderr
        folder_s, bridge, uid, *pid_s = done.stdout.split()
        folder, pids = Path(folder_s), [int(p) for p in pid_s]
        shims = pids_naming(folder_s)
        cgroups = pod_cgroups([uid])
        # orphaned and still running: etcd, the control plane, containerd, kubelet, shims
        assert len(pids) == 6 and all(_alive(p) for p in pids) and shims
        assert _links(bridge) and cgroups and mounts_under(folder)
    finally:
        k8s_node.up()

    assert not [p for p in [*pids, *shims] if _alive(p)]
    assert not pids_naming(folder_s)
    assert not [c for c in cgroups if c.exists()]
    assert not _links(bridge)
    assert not mounts_under(folder)
    assert not folder.exists()


def test_startup_failure_names_the_component_and_shows_its_log() -> None:
    with pytest.raises(StartupError) as failed:
        ControlPlane.start(apiserver_args=["--no-such-flag=1"])
    message = str(failed.value)
    assert message.startswith("kube-apiserver exited with status")
    assert "unknown flag: --no-such-flag" in message
    logs = Path(message.split("the end of ", 1)[1].split(":\n", 1)[0])
    assert not logs.parent.parent.exists(), "the failed run's folder was left behind"


def test_second_kubelet_is_refused_with_the_holders_pid(k8s_node) -> None:
    with pytest.raises(TimeoutError) as refused:
        KubeletLock().acquire(timeout=0.3)
    assert f"(pid {os.getpid()})" in str(refused.value)
    assert "/run/lock/gpuwarden-testbed-kubelet.lock" in str(refused.value)


def test_wait_for_says_what_did_not_happen() -> None:
    def boom() -> None:
        raise ValueError("not yet")

    with pytest.raises(TimeoutError) as late:
        wait_for(boom, 0.1, "the moon turning blue")
    assert "the moon turning blue did not happen within 0.1 s" in str(late.value)
    assert "ValueError: not yet" in str(late.value)
