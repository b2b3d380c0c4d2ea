"""Fixtures of the extender tests: `gpu_cluster` (see gpucluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gpucluster import GpuCluster, register_webhooks, scheduler_config, start_extender, stop


@pytest.fixture(scope="session")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuCluster]:
    from testbed import ControlPlane
    from testbed.kube import api_client
    from testbed.procs import free_ports

    port, hook_port = free_ports(2)
    cp = ControlPlane.start(scheduler_config=scheduler_config(port))
    folder = tmp_path_factory.mktemp("extender")
    proc = None
    try:
        proc = start_extender(cp.admin_kubeconfig, port, folder / "extender.log",
                              "--webhook-port", str(hook_port), "--tls-generate",
                              str(folder / "tls"), "--tls-hosts", "127.0.0.1")
        api = api_client(cp.admin_kubeconfig)
        register_webhooks(api, hook_port, (folder / "tls" / "ca.crt").read_bytes())
        yield GpuCluster(cp, api, proc, port, folder / "extender.log")
    finally:
        if proc is not None:
            stop(proc)
        cp.stop()
