"""Prometheus exporter: a Collector that builds every gpuwarden_ family at scrape time from the
latest published `View`, and a tiny HTTP server for /metrics and /healthz.

Labels are namespace, pod, container, gpu_uuid and small enums (source, action, check); never a
PID. On violations, `check` is the kind of check that failed (memory, compute, bypass, denied)
and `policy_rule`, `alert`, `severity` are what the policy says about it (the rule that decided
the response, its alert name and severity), so that alert rules can route on them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import Collector

from agent.bounded import SHUTDOWN_POLL, BoundedThreadingMixIn
from agent.model import ViolationLabels, WorkloadKey

__all__ = ["AgentCollector", "GpuRow", "MetricsServer", "Row", "View"]

WL = ["namespace", "pod", "container"]
WLG = [*WL, "gpu_uuid"]


@dataclass(frozen=True)
class Row:
    """One workload on one GPU, as the last loop saw it."""

    key: WorkloadKey
    gpu: str
    # What the shim enforces on this GPU: the limit read back from the workload's region (None:
    # no limit there, or the region could not be read), not the rule's.
    memory_limit_bytes: int | None
    used: Mapping[str, int | None]  # source -> bytes (None: source off)
    sm_ratio: float | None
    cores_limit_ratio: float | None
    agree: bool
    last_action: str = ""
    rule: str = ""


@dataclass(frozen=True)
class GpuRow:
    """One GPU of the node: NVML's view of the whole device and what the slices on it hold."""

    uuid: str
    index: int
    model: str
    total_bytes: int
    used_bytes: int | None  # NVML, every process (None: not sampled yet, or NVML failed)
    utilization_ratio: float | None
    allocated_bytes: int  # the memory limits of the slices placed on it
    cores_allocated_ratio: float  # their gpucores, as a share of the GPU
    slices: int  # workloads placed on it
    healthy: bool


@dataclass(frozen=True)
class View:
    version: str = ""
    policy_digest: str = ""
    policy_reloads_total: int = 0
    policy_reload_errors_total: int = 0
    policy_last_reload_ok: bool = True
    rows: tuple[Row, ...] = ()
    gpus: tuple[GpuRow, ...] = ()
    workloads: int = 0
    violations_total: Mapping[ViolationLabels, int] = field(default_factory=dict)
    actions_total: Mapping[tuple[WorkloadKey, str], int] = field(default_factory=dict)
    ebpf_up: bool = False
    ebpf_reason: str = "not started"
    ebpf_lost_events_total: int = 0
    ebpf_errors_total: int = 0
    nvml_up: bool = False
    nvml_reason: str = "not started"
    procevents_up: bool = False
    region_errors_total: int = 0
    loop_seconds: float = 0.0
    last_loop_ts: float = 0.0


def _wl(k: WorkloadKey) -> list[str]:
    return [k.namespace, k.pod, k.container]


class AgentCollector(Collector):
    def __init__(self, view: Callable[[], View]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        v = self._view()
        info = InfoMetricFamily("gpuwarden_build", "gpuwarden build", labels=[])
        info.add_metric([], {"version": v.version})
        yield info
        pol = InfoMetricFamily("gpuwarden_policy", "The loaded policy (digest of the last good)")
        pol.add_metric([], {"digest": v.policy_digest})
        yield pol
        yield CounterMetricFamily("gpuwarden_policy_reloads", "Successful policy reloads",
                                  value=v.policy_reloads_total)
        yield CounterMetricFamily("gpuwarden_policy_reload_errors",
                                  "Policy reloads rejected (the last good policy stays)",
                                  value=v.policy_reload_errors_total)
        yield GaugeMetricFamily("gpuwarden_policy_last_reload_success",
                                "1 if the last reload attempt succeeded",
                                value=int(v.policy_last_reload_ok))
        yield GaugeMetricFamily("gpuwarden_workloads", "Workloads the agent tracks",
                                value=v.workloads)
        yield from self._gpus(v)
        yield from self._usage(v)
        viol = CounterMetricFamily("gpuwarden_violations", "Violations detected (onsets), by "
                                   "check and by the policy's rule, alert name and severity",
                                   labels=[*WLG, "check", "policy_rule", "alert", "severity"])
        for vl, n in sorted(v.violations_total.items(), key=str):
            viol.add_metric([*_wl(vl.key), vl.gpu, vl.check, vl.policy_rule, vl.alert,
                             vl.severity], n)
        yield viol
        acts = CounterMetricFamily("gpuwarden_actions", "Actions taken (would_* when dry)",
                                   labels=[*WL, "action"])
        for (key, action), n in sorted(v.actions_total.items(), key=str):
            acts.add_metric([*_wl(key), action], n)
        yield acts
        yield GaugeMetricFamily("gpuwarden_ebpf_up", "1 if the eBPF audit is attached",
                                value=int(v.ebpf_up))
        yield CounterMetricFamily("gpuwarden_ebpf_lost_events", "eBPF events lost in the "
                                  "ring buffer", value=v.ebpf_lost_events_total)
        yield CounterMetricFamily("gpuwarden_ebpf_errors", "eBPF program errors counted in "
                                  "kernel maps", value=v.ebpf_errors_total)
        yield GaugeMetricFamily("gpuwarden_nvml_up", "1 if NVML sampling works",
                                value=int(v.nvml_up))
        yield GaugeMetricFamily("gpuwarden_procevents_up", "1 if kernel process events are "
                                "received (else /proc is polled)", value=int(v.procevents_up))
        yield CounterMetricFamily("gpuwarden_region_errors", "Shared region files that could "
                                  "not be read", value=v.region_errors_total)
        yield GaugeMetricFamily("gpuwarden_agent_loop_seconds", "Duration of the last loop",
                                value=v.loop_seconds)
        yield GaugeMetricFamily("gpuwarden_agent_last_loop_timestamp_seconds",
                                "Unix time of the last completed loop", value=v.last_loop_ts)

    def _gpus(self, v: View) -> Iterator[Metric]:
        info = InfoMetricFamily("gpuwarden_gpu", "A GPU of this node (index: NVML's order)",
                                labels=["gpu_uuid"])
        fams = {name: GaugeMetricFamily(f"gpuwarden_gpu_{name}", text, labels=["gpu_uuid"])
                for name, text in (
                    ("memory_total_bytes", "GPU memory of the device"),
                    ("memory_used_bytes", "GPU memory used on the device, every process (NVML)"),
                    ("memory_allocated_bytes", "GPU memory given to slices: the sum of the "
                     "memory limits of the workloads placed on the device"),
                    ("cores_allocated_ratio", "Compute given to slices: the sum of the "
                     "gpucores of the workloads placed on the device, as a share of it"),
                    ("utilization_ratio", "Share of the last sample period in which a kernel "
                     "ran on the device (NVML)"),
                    ("slices", "Workloads placed on the device"),
                    ("healthy", "1 if NVML answers for the device"))}
        for g in v.gpus:
            info.add_metric([g.uuid], {"index": str(g.index), "model": g.model})
            fams["memory_total_bytes"].add_metric([g.uuid], g.total_bytes)
            if g.used_bytes is not None:
                fams["memory_used_bytes"].add_metric([g.uuid], g.used_bytes)
            if g.utilization_ratio is not None:
                fams["utilization_ratio"].add_metric([g.uuid], g.utilization_ratio)
            fams["memory_allocated_bytes"].add_metric([g.uuid], g.allocated_bytes)
            fams["cores_allocated_ratio"].add_metric([g.uuid], g.cores_allocated_ratio)
            fams["slices"].add_metric([g.uuid], g.slices)
            fams["healthy"].add_metric([g.uuid], int(g.healthy))
        yield info
        yield from fams.values()

    def _usage(self, v: View) -> Iterator[Metric]:
        used = GaugeMetricFamily("gpuwarden_workload_memory_used_bytes",
                                 "GPU memory a workload uses, per source", labels=[*WLG, "source"])
        limit = GaugeMetricFamily("gpuwarden_workload_memory_limit_bytes",
                                  "GPU memory limit of a workload on a GPU, as the shim enforces "
                                  "it (read back from the workload's region)", labels=WLG)
        sm = GaugeMetricFamily("gpuwarden_workload_compute_used_ratio",
                               "Share of one GPU's compute a workload uses (NVML)",
                               labels=[*WLG, "source"])
        cores = GaugeMetricFamily("gpuwarden_workload_compute_limit_ratio",
                                  "Compute share limit of a workload", labels=WLG)
        agree = GaugeMetricFamily("gpuwarden_workload_sources_agree",
                                  "1 if shim, eBPF and NVML agree within tolerance", labels=WLG)
        for r in v.rows:
            lab = [*_wl(r.key), r.gpu]
            for source, b in sorted(r.used.items()):
                if b is not None:
                    used.add_metric([*lab, source], b)
            if r.memory_limit_bytes is not None:
                limit.add_metric(lab, r.memory_limit_bytes)
            if r.sm_ratio is not None:
                sm.add_metric([*lab, "nvml"], r.sm_ratio)
            if r.cores_limit_ratio is not None:
                cores.add_metric(lab, r.cores_limit_ratio)
            agree.add_metric(lab, int(r.agree))
        yield from (used, limit, sm, cores, agree)


def health(v: View, now: float, stale_after: float = 10.0) -> tuple[bool, dict[str, object]]:
    fresh = v.last_loop_ts > 0 and now - v.last_loop_ts <= stale_after
    ok = fresh and bool(v.policy_digest)
    return ok, {
        "ok": ok,
        "loop_fresh": fresh,
        "policy_digest": v.policy_digest,
        "policy_last_reload_ok": v.policy_last_reload_ok,
        "ebpf": "on" if v.ebpf_up else f"off: {v.ebpf_reason}",
        "nvml": "on" if v.nvml_up else f"off: {v.nvml_reason}",
        "procevents": "on" if v.procevents_up else "off: polling /proc",
        "workloads": v.workloads,
    }


class MetricsServer:
    """Serves /metrics from `registry` with prometheus_client's own WSGI app (gzip and
    OpenMetrics negotiated from the request's headers, `?name[]=` filters) and /healthz from
    the view, on its own thread."""

    def __init__(self, registry: CollectorRegistry, view: Callable[[], View],
                 port: int, host: str = "127.0.0.1",
                 clock: Callable[[], float] | None = None) -> None:
        metrics = make_wsgi_app(registry)
        now = clock or time.time

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
            path = environ.get("PATH_INFO", "/")
            if path == "/metrics":
                return list(metrics(environ, start_response))
            if path == "/healthz":
                ok, doc = health(view(), now())
                body = json.dumps(doc).encode() + b"\n"
                status = "200 OK" if ok else "503 Service Unavailable"
                ctype = "application/json"
            else:
                body, status, ctype = b"try /metrics or /healthz\n", "404 Not Found", "text/plain"
            start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
            return [body]

        class Quiet(WSGIRequestHandler):
            timeout = 5.0  # an idle connection is closed, never held

            def log_message(self, format: str, *args: Any) -> None:
                return

        class Server(BoundedThreadingMixIn, WSGIServer):
            """At most 32 connections at once, 8 per client address (agent.bounded)."""

            max_connections, max_per_peer = 32, 8
            # a burst of connections waits in the kernel's queue, not in SYN retransmits (1 s, 3 s:
            # socketserver's default backlog of 5 dropped a flood's SYNs, so it took seconds to
            # be refused, and the 5-s idle timeout freed slots for it meanwhile)
            request_queue_size = 128

            def peer(self, request: Any, client_address: Any) -> Any:
                return client_address[0]

            def refuse(self, request: Any) -> None:
                with contextlib.suppress(OSError):
                    request.send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n", socket.MSG_DONTWAIT)

        self.httpd = make_server(host, port, app, Server, handler_class=Quiet)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        args=(SHUTDOWN_POLL,), name="metrics",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
