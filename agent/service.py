"""`gpuwarden agent`: build the Agent, start its control socket and exporter, run the loop
until SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from agent.daemon import Agent, AgentConfig
from agent.reload import PolicyError
from gpuwarden.resources import DEVICE_SPLIT_COUNT

__all__ = ["cluster_mode", "serve"]


def cluster_mode(node: str | None, kubeconfig: str | None,
                 regions_root: str | None) -> Any:
    """The ClusterMode of `gpuwarden agent --kubernetes`: the pod watcher and the Event writer
    over one API client."""
    import os
    import socket

    from agent.cluster import DEFAULT_REGIONS_ROOT, ClusterMode
    from agent.kubeapi import EventWriter, KubeApi
    from gpuwarden.informer import Informer
    from gpuwarden.kubeclient import api_client

    name = node or os.environ.get("NODE_NAME") or socket.gethostname()
    api = KubeApi(api_client(kubeconfig))

    def log(ev: dict[str, Any]) -> None:
        import json

        print(json.dumps(ev), file=sys.stderr, flush=True)

    return ClusterMode(Informer("pods", api.pods_of_node(name), log=log),
                       Informer("node", api.node(name), log=log), name,
                       regions_root or DEFAULT_REGIONS_ROOT,
                       post_event=EventWriter(api.create_event, log=log))


def serve(policy: list[str], state_dir: Path, metrics_port: int | None = None,
          metrics_host: str = "127.0.0.1", dry_run: bool = False,
          protect: list[str] | None = None, ebpf: bool = True, audit_unmanaged: bool = False,
          libcuda: list[Path] | None = None, tick: float = 1.0, quiet: bool = False,
          cluster: Any = None, split_count: int = DEVICE_SPLIT_COUNT) -> int:
    from prometheus_client import CollectorRegistry

    from agent.control import ControlServer
    from agent.exporter import AgentCollector, MetricsServer

    if not 0 < tick <= 60:  # NaN included
        print(f"gpuwarden agent: --tick {tick}: use a period in seconds, 0 < tick <= 60",
              file=sys.stderr)
        return 2
    cfg = AgentConfig(policy_paths=policy, state_dir=state_dir, metrics_port=metrics_port,
                      metrics_host=metrics_host, dry_run=dry_run, protect=protect or [],
                      audit_unmanaged=audit_unmanaged,
                      ebpf=ebpf, libcuda=libcuda, tick_seconds=tick, nvml_seconds=tick,
                      audit_stream=None if quiet else sys.stdout, cluster=cluster,
                      split_count=split_count)
    if cluster is not None:
        cfg.node = cluster.node
    try:
        agent = Agent(cfg)
        agent.start()
    except PolicyError as err:
        print(f"gpuwarden agent: refusing to start, the policy is invalid:\n{err}",
              file=sys.stderr)
        return 1
    except OSError as err:
        print(f"gpuwarden agent: cannot start: {err}", file=sys.stderr)
        return 2
    servers: list[Any] = []
    try:
        control = ControlServer(agent.ledger.socket_path, agent)
        control.start()
        servers.append(control)
        if metrics_port is not None:
            reg = CollectorRegistry()
            reg.register(AgentCollector(lambda: agent.view))
            try:
                metrics = MetricsServer(reg, lambda: agent.view, metrics_port, metrics_host)
            except (OSError, OverflowError) as err:  # in use, not an address of this host
                print(f"gpuwarden agent: cannot serve metrics on {metrics_host}:{metrics_port}"
                      f": {getattr(err, 'strerror', None) or err} (give another --metrics-port, "
                      "or 0 for any free port)", file=sys.stderr)
                return 2
            metrics.start()
            servers.append(metrics)
            print(f"gpuwarden agent: metrics on http://{metrics_host}:{metrics.port}/metrics "
                  f"and /healthz", file=sys.stderr, flush=True)
        print(f"gpuwarden agent: ready; state in {state_dir}; ebpf "
              f"{'on' if agent.sources.ebpf else 'off: ' + agent.sources.ebpf_reason}; nvml "
              f"{'on' if agent.sources.nvml else 'off: ' + agent.sources.nvml_reason}",
              file=sys.stderr, flush=True)

        def on_signal(signum: int, _frame: object) -> None:
            if not agent.stopping.is_set():
                print(f"gpuwarden agent: {signal.Signals(signum).name}: stopping",
                      file=sys.stderr, flush=True)
            agent.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        agent.run_forever()
        return 0
    finally:
        for s in reversed(servers):
            s.close()
        agent.close(exiting=True)
