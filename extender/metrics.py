"""The extender's Prometheus metrics: verb latencies, binds, ledger conflicts, rejections by
reason, and what is allocated on each node's GPUs (built at scrape time from the node views)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from policy.model import MIB

__all__ = ["Metrics"]

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _Allocations(Collector):
    def __init__(self, views: Callable[[], Sequence[Any]]) -> None:
        self.views = views

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "gpu_uuid"]
        mem = GaugeMetricFamily("gpuwarden_gpu_allocated_memory_bytes",
                                "GPU memory given out to pods by the extender", labels=labels)
        cap = GaugeMetricFamily("gpuwarden_gpu_memory_capacity_bytes",
                                "GPU memory the node registered (after memory scaling)",
                                labels=labels)
        cores = GaugeMetricFamily("gpuwarden_gpu_allocated_cores_ratio",
                                  "Share of the GPU's compute given out (0..1)", labels=labels)
        slices = GaugeMetricFamily("gpuwarden_gpu_allocated_slices",
                                   "Containers holding a slice of the GPU", labels=labels)
        total = GaugeMetricFamily("gpuwarden_gpu_slices", "Slices of the GPU (split count)",
                                  labels=labels)
        for view in self.views():
            if view.state is None:
                continue
            inv = view.state.inventory
            for d in inv.devices:
                u = view.state.used.get(d.uuid)
                lv = [view.name, d.uuid]
                mem.add_metric(lv, (u.memory_mib if u else 0) * MIB)
                cap.add_metric(lv, d.memory_mib * MIB)
                cores.add_metric(lv, (u.cores if u else 0) / 100)
                slices.add_metric(lv, u.slices if u else 0)
                total.add_metric(lv, inv.split_count)
        yield from (mem, cap, cores, slices, total)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.filter_seconds = Histogram("gpuwarden_extender_filter_seconds",
                                        "Time to answer kube-scheduler's filter call",
                                        buckets=_LATENCY, registry=r)
        self.prioritize_seconds = Histogram("gpuwarden_extender_prioritize_seconds",
                                            "Time to answer kube-scheduler's prioritize call",
                                            buckets=_LATENCY, registry=r)
        self.bind_seconds = Histogram("gpuwarden_extender_bind_seconds",
                                      "Time to reserve, annotate and bind a pod",
                                      buckets=_LATENCY, registry=r)
        self.binds = Counter("gpuwarden_extender_binds_total", "Bind calls by result",
                             ["result"], registry=r)
        self.conflicts = Counter("gpuwarden_extender_ledger_conflicts_total",
                                 "Node ledger updates refused because the Node changed first "
                                 "(another replica or writer); each was re-read and retried",
                                 registry=r)
        self.releases = Counter("gpuwarden_extender_releases_total",
                                "Reservations released (pod deleted or finished, failed bind)",
                                registry=r)
        self.nudges = Counter("gpuwarden_extender_nudges_total",
                              "Waiting pods touched so kube-scheduler retries them after "
                              "capacity freed", registry=r)
        self.rejections = Counter("gpuwarden_extender_rejections_total",
                                  "Nodes rejected by filter, by reason", ["reason"], registry=r)
        self.admissions = Counter("gpuwarden_webhook_reviews_total",
                                  "Admission reviews by result", ["result"], registry=r)

    def bind_views(self, views: Callable[[], Sequence[Any]]) -> None:
        self.registry.register(_Allocations(views))
