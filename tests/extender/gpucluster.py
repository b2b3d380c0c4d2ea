"""The harness of the extender's k8s tests: a control plane whose kube-scheduler calls a real
`gpuwarden extender` process, with the
admission webhooks registered, for the `k8s` tests of the extender. GPU nodes are fake Nodes
(created through the API, status patched Ready, the device plugin's annotation written), so no
kubelet is needed: a bound pod simply stays bound."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "scheduler"


@dataclass
class GpuCluster:
    cp: Any  # testbed.ControlPlane
    api: Any  # kubernetes ApiClient (admin)
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def add_gpu_node(self, name: str, gpus: int = 8, memory_mib: int = 81920,
                     gpu_type: str = "NVIDIA H200", split: int = 10,
                     labels: Mapping[str, str] | None = None) -> None:
        from testbed.kube import add_fake_node

        from gpuwarden.annotations import (
            HAMI_NODE_REGISTER,
            NODE_GPUS,
            GpuDevice,
            NodeInventory,
            encode_hami_register,
            encode_node_gpus,
        )

        inv = NodeInventory(tuple(GpuDevice(f"GPU-{name}-{i}", i, memory_mib, 100, gpu_type)
                                  for i in range(gpus)), split, "2026-12-01T00:00:00Z")
        add_fake_node(self.api, name, {"cpu": "64", "memory": "512Gi", "pods": "250",
                                       "nvidia.com/gpu": str(gpus * split)},
                      labels=labels, annotations={NODE_GPUS: encode_node_gpus(inv),
                                                  HAMI_NODE_REGISTER: encode_hami_register(inv)})

    def metrics(self, port: int | None = None) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port or self.port}/metrics",
                                    timeout=10) as r:
            return r.read().decode()

    def wait_known(self, names: Sequence[str], timeout: float = 30.0) -> None:
        """Until the extender's node cache has these nodes (it watches; no fixed sleep)."""
        import json
        import urllib.request

        pod = {"metadata": {"name": "probe", "namespace": "default", "uid": "probe"},
               "spec": {"containers": [{"name": "c"}]}}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = json.dumps({"Pod": pod, "NodeNames": list(names)}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{self.port}/filter", data=body)
            with urllib.request.urlopen(req, timeout=10) as r:
                if sorted(json.loads(r.read())["NodeNames"]) == sorted(names):
                    return
            time.sleep(0.05)
        raise TimeoutError(f"the extender did not learn of nodes {names} in {timeout}s")


def start_extender(kubeconfig: Path, port: int, log: Path, *extra: str,
                   policy: Path = REPO / "examples" / "policies",
                   timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """A `gpuwarden extender` process (the examples policy by default); returns once ready."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuwarden", "extender", "--kubeconfig", str(kubeconfig),
             "--port", str(port), "--policy", str(policy), *extra],
            cwd=REPO, env=env, stdout=out, stderr=out)
    deadline = time.monotonic() + timeout
    while "gpuwarden extender: ready" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"the extender did not become ready:\n{log.read_text()}")
        time.sleep(0.1)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def scheduler_config(port: int) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / "scheduler-config.yaml").read_text())
    for key in ("apiVersion", "kind", "leaderElection"):
        doc.pop(key)
    doc["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{port}"
    return doc


def register_webhooks(api: Any, port: int, ca: bytes) -> None:
    from kubernetes import client

    adm = client.AdmissionregistrationV1Api(api)
    for doc in yaml.safe_load_all((EXAMPLES / "webhooks.yaml").read_text()):
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": base64.b64encode(ca).decode()}
        if doc["kind"] == "MutatingWebhookConfiguration":
            adm.create_mutating_webhook_configuration(doc)
        else:
            adm.create_validating_webhook_configuration(doc)
