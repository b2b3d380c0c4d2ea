"""The control plane of a test-bed run: etcd (data on a tmpfs), kube-apiserver,
kube-scheduler and kube-controller-manager on free 127.0.0.1 ports, with the run's own
certificates.  Ready when the apiserver's /readyz answers ok."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from testbed.assets import Assets, find_assets
from testbed.pki import CertPair, Pki, make_pki
from testbed.procs import Component, StartupError, free_ports, wait_for
from testbed.runfolder import RunFolder

__all__ = ["ControlPlane", "write_kubeconfig"]

SERVICE_CIDR = "10.0.0.0/24"
CONTROLLERS = "*,-nodeipam,-nodelifecycle,-ttl,-bootstrapsigner,-tokencleaner,-cloud-node-lifecycle"


def write_kubeconfig(path: Path, server: str, ca: Path, client: CertPair | None = None,
                     token: str | None = None) -> Path:
    user: dict[str, str] = {}
    if client is not None:
        user = {"client-certificate": str(client.cert), "client-key": str(client.key)}
    if token is not None:
        user["token"] = token
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "testbed",
        "clusters": [{"name": "testbed",
                      "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "testbed", "user": user}],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "testbed"}}],
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


class ControlPlane:
    """Start with `ControlPlane.start()`; `stop()` ends every process and removes the run folder.

    `url` is the apiserver's address, `admin_kubeconfig` a kubeconfig of a system:masters user,
    `folder` the run folder (logs in `folder/logs`)."""

    def __init__(self, assets: Assets, run: RunFolder) -> None:
        self.assets = assets
        self.run = run
        self.folder = run.path
        self.logs = self.folder / "logs"
        self.pki: Pki
        self.components: dict[str, Component] = {}
        etcd_client, etcd_peer, api, sched, ctrl = free_ports(5)
        self.etcd_url = f"http://127.0.0.1:{etcd_client}"
        self._etcd_peer = f"http://127.0.0.1:{etcd_peer}"
        self.port = api
        self.url = f"https://127.0.0.1:{api}"
        self._sched_port, self._ctrl_port = sched, ctrl
        self.scheduler_config: dict[str, Any] = {}
        self.admin_kubeconfig = self.folder / "admin.kubeconfig"

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    def start(cls, assets: Assets | None = None, *, timeout: float = 60.0,
              scheduler_config: Mapping[str, Any] | None = None,
              apiserver_args: Sequence[str] = ()) -> ControlPlane:
        """A ready control plane.  `scheduler_config` adds keys (e.g. `extenders`) to the
        KubeSchedulerConfiguration; `apiserver_args` adds flags to kube-apiserver.  A port
        taken by another process between choosing and binding it means a new try on others."""
        assets = assets or find_assets()
        for attempt in range(3):
            cp = cls(assets, RunFolder())
            try:
                cp._start(timeout, dict(scheduler_config or {}), list(apiserver_args))
                return cp
            except StartupError as err:
                cp.stop()
                if "address already in use" not in str(err) or attempt == 2:
                    raise
            except BaseException:
                cp.stop()
                raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float, scheduler_config: dict[str, Any],
               apiserver_args: list[str]) -> None:
        self.pki = make_pki(self.folder / "pki", self.assets.openssl)
        admin = self.pki.issue("admin", "testbed-admin", ["system:masters"])
        write_kubeconfig(self.admin_kubeconfig, self.url, self.pki.ca.cert, admin)
        self._start_etcd()
        self._start_apiserver(apiserver_args)
        self.scheduler_config = scheduler_config
        self._start_scheduler()
        self._start_controller_manager()
        wait_for(self._ready, timeout, f"kube-apiserver {self.url}/readyz answering ok",
                 watch=list(self.components.values()))

    def _launch(self, name: str, argv: Sequence[str | Path]) -> Component:
        comp = Component(name, argv, self.logs / f"{name}.log").start()
        self.components[name] = comp
        return comp

    def _start_etcd(self) -> None:
        data = self.folder / "etcd"
        data.mkdir()
        # etcd fsyncs every write: on a tmpfs that costs nothing (and is unmounted at stop)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m,mode=0700", "gwtb-etcd",
                        str(data)], check=True, capture_output=True)
        self._launch("etcd", [
            self.assets.etcd, "--name", "default", "--data-dir", data / "data",
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", self._etcd_peer,
            "--initial-advertise-peer-urls", self._etcd_peer,
            "--initial-cluster", f"default={self._etcd_peer}"])

    def _start_apiserver(self, extra: list[str]) -> None:
        p = self.pki
        self._launch("kube-apiserver", [
            self.assets.bin("kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={p.serving.cert}", f"--tls-private-key-file={p.serving.key}",
            f"--client-ca-file={p.ca.cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={p.sa_public}",
            f"--service-account-signing-key-file={p.sa_private}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true", "--endpoint-reconciler-type=none",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--profiling=false",
            *extra])

    def _start_scheduler(self) -> None:
        kubeconfig = self.folder / "scheduler.kubeconfig"
        if not kubeconfig.exists():
            cert = self.pki.issue("scheduler", "system:kube-scheduler")
            write_kubeconfig(kubeconfig, self.url, self.pki.ca.cert, cert)
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1",
                  "kind": "KubeSchedulerConfiguration",
                  "clientConnection": {"kubeconfig": str(kubeconfig)},
                  "leaderElection": {"leaderElect": False},
                  **self.scheduler_config}
        path = self.folder / "scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        self._launch("kube-scheduler", [
            self.assets.bin("kube-scheduler"), f"--config={path}",
            "--bind-address=127.0.0.1", f"--secure-port={self._sched_port}"])

    def _start_controller_manager(self) -> None:
        self._launch("kube-controller-manager", [
            self.assets.bin("kube-controller-manager"),
            f"--kubeconfig={self.admin_kubeconfig}", "--leader-elect=false",
            f"--service-account-private-key-file={self.pki.sa_private}",
            f"--root-ca-file={self.pki.ca.cert}",
            "--use-service-account-credentials=false",
            f"--controllers={CONTROLLERS}",
            "--bind-address=127.0.0.1", f"--secure-port={self._ctrl_port}"])

    def restart_scheduler(self, scheduler_config: Mapping[str, Any] | None = None,
                          timeout: float = 30.0) -> None:
        """Restart kube-scheduler with other KubeSchedulerConfiguration keys (e.g.
        `{"extenders": [...]}`; `{}` for none); returns when it serves /healthz."""
        old = self.components.pop("kube-scheduler")
        old.stop()
        self.scheduler_config = dict(scheduler_config or {})
        self._start_scheduler()
        comp = self.components["kube-scheduler"]
        wait_for(lambda: self._get(f"https://127.0.0.1:{self._sched_port}/healthz") == "ok",
                 timeout, "kube-scheduler answering /healthz", watch=[comp])

    def stop(self) -> None:
        """Stop every component (reverse start order), unmount, remove the run folder."""
        for name in reversed(list(self.components)):
            self.components.pop(name).stop()
        self.run.remove()

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- access -------------------------------------------------------------------------
    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        ctx.load_cert_chain(str(self.folder / "pki" / "admin.crt"),
                            str(self.folder / "pki" / "admin.key"))
        return ctx

    def _get(self, url: str) -> str:
        ctx = self._ssl()
        if "127.0.0.1:" + str(self.port) not in url:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving cert
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return str(resp.read().decode())

    def _ready(self) -> bool:
        return self._get(f"{self.url}/readyz") == "ok"

    def get_json(self, path: str) -> Any:
        """GET an API path as the admin (e.g. "/api/v1/namespaces")."""
        return json.loads(self._get(self.url + path))

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig with a client certificate for `user` in `groups` (for RBAC tests)."""
        name = "user-" + "".join(c if c.isalnum() else "-" for c in user)
        cert = self.pki.issue(name, user, groups)
        return write_kubeconfig(self.folder / f"{name}.kubeconfig", self.url,
                                self.pki.ca.cert, cert)
