"""Fixtures of the extender tests: `gpu_cluster` (see gpucluster.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from gpucluster import REPO, GpuCluster, register_webhooks, scheduler_config


@pytest.fixture(scope="session")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuCluster]:
    from testbed import ControlPlane
    from testbed.kube import api_client
    from testbed.procs import free_ports

    port, hook_port = free_ports(2)
    cp = ControlPlane.start(scheduler_config=scheduler_config(port))
    folder = tmp_path_factory.mktemp("extender")
    log = folder / "extender.log"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuwarden", "extender", "--kubeconfig",
             str(cp.admin_kubeconfig), "--port", str(port), "--webhook-port", str(hook_port),
             "--tls-generate", str(folder / "tls"), "--tls-hosts", "127.0.0.1",
             "--policy", str(REPO / "examples" / "policies")],
            cwd=REPO, env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 60
        while "gpuwarden extender: ready" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the extender did not become ready:\n{log.read_text()}")
            time.sleep(0.1)
        api = api_client(cp.admin_kubeconfig)
        register_webhooks(api, hook_port, (folder / "tls" / "ca.crt").read_bytes())
        yield GpuCluster(cp, api, proc, port, log)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        cp.stop()
