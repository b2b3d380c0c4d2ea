"""A node of the test bed: containerd 2 (its own config, root, state and socket under the run
folder; CDI enabled; Debian's runc; pods on a CNI bridge of the run's own) and a kubelet
registered with the control plane.  One kubelet per machine at a time: the kubelet's
device-plugin folder is fixed, so `Node` holds a file lock (the holder's pid written in it)
from start to stop."""

from __future__ import annotations

import calendar
import fcntl
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from pyroute2 import IPRoute

from testbed import images, kube
from testbed.controlplane import ControlPlane, write_kubeconfig
from testbed.procs import Component, free_ports, wait_for
from testbed.runfolder import (
    PREFIX,
    clean_stale_runs,
    delete_runc_containers,
    filesystem_type,
    keep_logs,
    kill_pids_naming,
    remove_pod_cgroups,
    unmount_all,
)

__all__ = ["DEVICE_PLUGIN_DIR", "KUBELET_LOCK", "KubeletLock", "Node"]

KUBELET_LOCK = Path("/run/lock/gpuwarden-testbed-kubelet.lock")
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")


class KubeletLock:
    """An exclusive flock on KUBELET_LOCK, waited for at most `timeout` seconds."""

    def __init__(self, path: Path = KUBELET_LOCK) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, timeout: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise TimeoutError(
                        f"another test-bed kubelet holds {self.path} (pid {holder}) for more "
                        f"than {timeout:g} s; only one kubelet can run per machine (its "
                        f"device-plugin folder is fixed): wait for it to stop, or end pid "
                        f"{holder} if it is a leftover") from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _used_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    with IPRoute() as ipr:
        nets = []
        for route in ipr.get_routes(family=socket.AF_INET):
            dst = route.get_attr("RTA_DST")
            if dst:
                nets.append(ipaddress.ip_network(f"{dst}/{route['dst_len']}", strict=False))
        for addr in ipr.get_addr(family=socket.AF_INET):
            nets.append(ipaddress.ip_network(
                f"{addr.get_attr('IFA_ADDRESS')}/{addr['prefixlen']}", strict=False))
    return nets


def pick_pod_subnet() -> str:
    """A /24 in 10.213.0.0/16 that no route or address of this machine overlaps."""
    used = _used_networks()
    for net in ipaddress.ip_network("10.213.0.0/16").subnets(new_prefix=24):
        if not any(net.overlaps(u) for u in used):
            return str(net)
    raise RuntimeError("no free /24 for pods in 10.213.0.0/16 (every one overlaps a route)")


def delete_bridges(prefix: str = PREFIX) -> list[str]:
    """Delete the links named prefix* (bridges of test-bed nodes); returns their names."""
    gone = []
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME") or ""
            if name.startswith(prefix):
                ipr.link("del", index=link["index"])
                gone.append(name)
    return gone


def parse_cri_log(text: str) -> str:
    """The output in a CRI log file: lines "TIME STREAM P|F TEXT", P a partial line."""
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 3:
            continue
        content = parts[3] if len(parts) == 4 else ""
        out.append(content if parts[2] == "P" else content + "\n")
    return "".join(out)


class Node:
    """Start with `Node.start(control_plane)`; `stop()` ends it and removes its folder.

    `name` is the Node's name, `folder` its folder (logs in `folder/logs`), `cdi_dir` where CDI
    specs go, `containerd_socket` and `ctr()` reach its containerd, `pod_logs_dir` holds the
    containers' logs (`container_log()` reads them), `plugins_registry_dir` is where DRA/CSI
    plugins register, DEVICE_PLUGIN_DIR where device plugins do; `startup_seconds` says how
    long each start-up step took."""

    def __init__(self, cp: ControlPlane, name: str) -> None:
        self.cp = cp
        self.name = name
        self.lock = KubeletLock()
        self.components: dict[str, Component] = {}
        self.startup_seconds: dict[str, float] = {}
        self.snapshotter = "overlayfs"
        self._api: Any = None
        self._set_paths()

    def _set_paths(self) -> None:
        self.folder = self.cp.folder / f"node-{self.name}"
        self.logs = self.folder / "logs"
        self.cdi_dir = self.folder / "cdi"
        self.containerd_socket = self.folder / "containerd" / "containerd.sock"
        self.runc_root = self.folder / "runc"
        self.kubelet_root = self.folder / "kubelet"
        self.plugins_registry_dir = self.kubelet_root / "plugins_registry"
        self.pod_logs_dir = self.folder / "pod-logs"
        self.bridge = f"{PREFIX}{self.cp.run.id}"
        self.images_dir = self.folder / "images"

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    def start(cls, cp: ControlPlane, name: str = "testbed-node", *, timeout: float = 60.0,
              lock_timeout: float | None = None) -> Node:
        """A Ready, untainted node with the pause and busybox images imported.  Waits at most
        `lock_timeout` seconds (GPUWARDEN_TESTBED_LOCK_TIMEOUT, else 900) for another run's
        kubelet to stop."""
        node = cls(cp, name)
        node.up(timeout=timeout, lock_timeout=lock_timeout)
        return node

    def up(self, *, timeout: float = 60.0, lock_timeout: float | None = None) -> None:
        """Start this (stopped) node again in a fresh folder: what `start` does."""
        if self.components:
            raise RuntimeError(f"node {self.name} is already up ({', '.join(self.components)})")
        if lock_timeout is None:
            lock_timeout = float(os.environ.get("GPUWARDEN_TESTBED_LOCK_TIMEOUT", "900"))
        t0 = time.perf_counter()
        self.lock.acquire(lock_timeout)
        self.startup_seconds = {"kubelet lock wait": time.perf_counter() - t0}
        try:
            # holding the lock, any node bridge or dead run left on this machine is stale
            clean_stale_runs()
            delete_bridges()
            self._set_paths()
            self.folder.mkdir()
            for d in (self.logs, self.cdi_dir, self.pod_logs_dir, self.kubelet_root,
                      self.images_dir):
                d.mkdir(parents=True, exist_ok=True)
            self._write_configs()
            t0 = time.perf_counter()
            self._start_containerd(timeout)
            t1 = time.perf_counter()
            self.import_image(images.pause_image(self.images_dir))
            self.import_image(images.busybox_image(self.images_dir))
            t2 = time.perf_counter()
            since = time.time()
            self._start_kubelet()
            self._wait_ready(since, timeout)
            kube.remove_not_ready_taint(self.api, self.name)
            self.startup_seconds.update({"containerd": t1 - t0, "images": t2 - t1,
                                         "kubelet Ready": time.perf_counter() - t2})
        except BaseException:
            self.stop()
            raise

    @property
    def api(self) -> Any:
        """An admin `kubernetes` ApiClient of the node's cluster."""
        if self._api is None:
            self._api = kube.api_client(self.cp.admin_kubeconfig)
        return self._api

    def _write_configs(self) -> None:
        cni_dir = self.folder / "cni"
        (cni_dir / "net.d").mkdir(parents=True)
        subnet = pick_pod_subnet()
        (cni_dir / "net.d" / "10-testbed.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": self.bridge,
            "plugins": [{"type": "bridge", "bridge": self.bridge, "isGateway": True,
                         "ipMasq": False, "hairpinMode": True,
                         "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]],
                                  "dataDir": str(cni_dir / "ipam")}}]}, indent=1))
        cd = self.folder / "containerd"
        # overlayfs cannot stack its upper layers on overlayfs (a run inside a container)
        self.snapshotter = "native" if filesystem_type(self.folder) == "overlay" else "overlayfs"
        runtime = "plugins.'io.containerd.cri.v1.runtime'"
        (cd / "config.toml").parent.mkdir(parents=True, exist_ok=True)
        (cd / "config.toml").write_text(f"""version = 3
root = "{cd}/root"
state = "{cd}/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{self.containerd_socket}.ttrpc"

[{runtime}]
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["{self.cdi_dir}"]
  netns_mounts_under_state_dir = true
[{runtime}.containerd]
  default_runtime_name = "runc"
[{runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{runtime}.containerd.runtimes.runc.options]
  BinaryName = "{self.cp.assets.runc}"
  Root = "{self.runc_root}"
  SystemdCgroup = false
[{runtime}.cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "{cni_dir}/net.d"
  max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "{self.snapshotter}"
[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
  platform = "linux/amd64"
  snapshotter = "{self.snapshotter}"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{images.PAUSE_IMAGE}"
""")
        pki = self.cp.pki
        cert = pki.issue(f"node-{self.name}", f"system:node:{self.name}", ["system:nodes"])
        write_kubeconfig(self.kubelet_root / "kubeconfig", self.cp.url, pki.ca.cert, cert)
        port, healthz = free_ports(2)
        self.healthz_url = f"http://127.0.0.1:{healthz}/healthz"
        (self.kubelet_root / "config.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": "127.0.0.1", "port": port,
            "healthzBindAddress": "127.0.0.1", "healthzPort": healthz,
            "readOnlyPort": 0,
            "nodeStatusUpdateFrequency": "1s",
            "podLogsDir": str(self.pod_logs_dir),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(pki.ca.cert)}},
            "authorization": {"mode": "AlwaysAllow"},
            # never collect the locally imported images (there is no registry to pull again)
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "serializeImagePulls": False,
            "resolvConf": "",
        }))

    def _start_containerd(self, timeout: float) -> None:
        env = dict(os.environ, PATH=f"{self.cp.assets.folder}:{os.environ.get('PATH', '')}")
        comp = Component("containerd", [
            self.cp.assets.bin("containerd"), "--config", self.folder / "containerd/config.toml"],
            self.logs / "containerd.log", env=env).start()
        self.components["containerd"] = comp
        # ctr blocks ~10 s when no daemon listens: test for the socket first
        wait_for(lambda: self.containerd_socket.is_socket()
                 and self.ctr("version", check=False).returncode == 0,
                 timeout, f"containerd answering on {self.containerd_socket}", watch=[comp])

    def _start_kubelet(self) -> None:
        r = self.kubelet_root
        self.components["kubelet"] = Component("kubelet", [
            self.cp.assets.bin("kubelet"), f"--config={r / 'config.yaml'}",
            f"--kubeconfig={r / 'kubeconfig'}", f"--root-dir={r}",
            f"--cert-dir={r / 'pki'}", f"--hostname-override={self.name}",
            "--node-ip=127.0.0.1"], self.logs / "kubelet.log").start()

    def _kubelet_healthy(self) -> bool:
        with urllib.request.urlopen(self.healthz_url, timeout=2) as resp:
            return bool(resp.read() == b"ok")

    def _ready_since(self, since: float) -> bool:
        """The Node is Ready with a heartbeat at or after `since` (a wall-clock time)."""
        node: Any = kube.core(self.api).read_node(self.name)
        for cond in node.status.conditions or []:
            if cond.type == "Ready" and cond.status == "True":
                beat = calendar.timegm(cond.last_heartbeat_time.utctimetuple())
                return bool(beat >= int(since))
        return False

    def _plugin_socket_since(self, since: float) -> bool:
        """The kubelet's device-plugin registration socket was made at or after `since` (it
        empties DEVICE_PLUGIN_DIR first)."""
        sock = DEVICE_PLUGIN_DIR / "kubelet.sock"
        return sock.is_socket() and sock.stat().st_mtime >= since

    def _wait_ready(self, since: float, timeout: float) -> None:
        wait_for(lambda: self._kubelet_healthy() and self._plugin_socket_since(since)
                 and self._ready_since(since), timeout,
                 f"node {self.name} Ready (device-plugin socket remade, status posted)",
                 watch=list(self.components.values()))

    def restart_kubelet(self, timeout: float = 60.0) -> None:
        """Stop and start the kubelet only: containerd and running pods stay.  The kubelet
        deletes the sockets in DEVICE_PLUGIN_DIR when it starts, so plugins re-register.
        Returns when the node reports Ready again."""
        since = time.time()
        self.components.pop("kubelet").stop()
        self._start_kubelet()
        self._wait_ready(since, timeout)

    def restart_containerd(self, timeout: float = 60.0) -> None:
        """Stop and start containerd (the containers keep running under their shims)."""
        self.components.pop("containerd").stop()
        self._start_containerd(timeout)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `ctr -n k8s.io ARGS` against this node's containerd."""
        cmd = [str(self.cp.assets.bin("ctr")), "--address", str(self.containerd_socket),
               "-n", "k8s.io", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"$ {' '.join(cmd)}\n{done.stderr.strip()}")
        return done

    def import_image(self, image: images.Image) -> str:
        """Import a docker-archive image into containerd's k8s.io namespace; its ref."""
        self.ctr("images", "import", "--platform", "linux/amd64", "--snapshotter", self.snapshotter,
                 str(image.tarball))
        return image.ref

    def container_log(self, pod: Any, container: str = "main") -> str:
        """What a container of `pod` (a V1Pod on this node) wrote to stdout and stderr, read
        from podLogsDir (the apiserver cannot reach this kubelet: no `kubectl logs`)."""
        meta = pod.metadata
        folder = self.pod_logs_dir / f"{meta.namespace}_{meta.name}_{meta.uid}" / container
        files = sorted(folder.glob("*.log"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)
        if not files:
            raise FileNotFoundError(f"no log of container {container!r} of pod "
                                    f"{meta.namespace}/{meta.name} under {folder}")
        return parse_cri_log(files[-1].read_text())

    def stop(self) -> None:
        """Stop the kubelet, the containers, containerd and its shims; unmount everything under
        the node's folder, delete its bridge, remove the folder, release the kubelet lock."""
        try:
            if "kubelet" in self.components:
                self.components.pop("kubelet").stop()
            delete_runc_containers(self.runc_root, str(self.cp.assets.runc))
            for name in reversed(list(self.components)):
                self.components.pop(name).stop()
            kill_pids_naming(str(self.folder))  # the shims run in sessions of their own
            remove_pod_cgroups(self.kubelet_root)
            keep_logs(self.folder)
            unmount_all(self.folder)
            with IPRoute() as ipr:
                for index in ipr.link_lookup(ifname=self.bridge):
                    ipr.link("del", index=index)
            shutil.rmtree(self.folder, ignore_errors=True)
        finally:
            self.lock.release()
