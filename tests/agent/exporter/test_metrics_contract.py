"""The exporter's families follow the metrics contract of docs/metrics.md (gpuwarden_ prefix,
base units, no PID label), reflect the published view, and /healthz tells whether the agent
is live and why eBPF is off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry

from agent.exporter import AgentCollector, GpuRow, MetricsServer, Row, View
from agent.model import ViolationLabels, WorkloadKey

K = WorkloadKey("ml", "train-0", "main")


def view(**kw: object) -> View:
    base: dict[str, object] = dict(
        version="0.1.0", policy_digest="abc123", policy_reload_errors_total=2,
        rows=(Row(K, "GPU-1", 1 << 30, {"shim": 100, "ebpf": 120, "nvml": None}, 0.25, 0.3,
                  True),),
        workloads=1, violations_total={ViolationLabels(K, "GPU-1", "bypass", "training",
                                                          "TrainingOverGpuSlice", "critical"): 3},
        actions_total={(K, "kill"): 1}, ebpf_up=False, ebpf_reason="bcc missing",
        last_loop_ts=1000.0)
    base.update(kw)
    return View(**base)


def registry(v: View) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(AgentCollector(lambda: v))
    return reg


def test_values_and_labels() -> None:
    reg = registry(view())
    wl = {"namespace": "ml", "pod": "train-0", "container": "main", "gpu_uuid": "GPU-1"}
    get = reg.get_sample_value
    assert get("gpuwarden_workload_memory_used_bytes", {**wl, "source": "shim"}) == 100
    assert get("gpuwarden_workload_memory_used_bytes", {**wl, "source": "ebpf"}) == 120
    assert get("gpuwarden_workload_memory_used_bytes", {**wl, "source": "nvml"}) is None
    assert get("gpuwarden_workload_memory_limit_bytes", wl) == 1 << 30
    assert get("gpuwarden_workload_compute_limit_ratio", wl) == 0.3
    assert get("gpuwarden_violations_total", {
        **wl, "check": "bypass", "policy_rule": "training", "alert": "TrainingOverGpuSlice",
        "severity": "critical"}) == 3
    wl.pop("gpu_uuid")
    assert get("gpuwarden_actions_total", {**wl, "action": "kill"}) == 1
    assert get("gpuwarden_policy_info", {"digest": "abc123"}) == 1
    assert get("gpuwarden_policy_reload_errors_total") == 2
    assert get("gpuwarden_build_info", {"version": "0.1.0"}) == 1
    assert get("gpuwarden_ebpf_up") == 0


def test_per_gpu_series_show_the_device_and_its_slices() -> None:
    gpus = (GpuRow("GPU-1", 0, "NVIDIA H200", 80 << 30, 5 << 30, 0.25, 4 << 30, 0.8, 2, True),
            GpuRow("GPU-2", 1, "NVIDIA H200", 80 << 30, None, None, 0, 0.0, 0, False))
    get = registry(view(gpus=gpus)).get_sample_value
    one, two = {"gpu_uuid": "GPU-1"}, {"gpu_uuid": "GPU-2"}
    assert get("gpuwarden_gpu_info", {**one, "index": "0", "model": "NVIDIA H200"}) == 1
    assert get("gpuwarden_gpu_memory_total_bytes", one) == 80 << 30
    assert get("gpuwarden_gpu_memory_used_bytes", one) == 5 << 30
    assert get("gpuwarden_gpu_memory_allocated_bytes", one) == 4 << 30
    assert get("gpuwarden_gpu_cores_allocated_ratio", one) == 0.8
    assert get("gpuwarden_gpu_utilization_ratio", one) == 0.25
    assert get("gpuwarden_gpu_slices", one) == 2
    assert get("gpuwarden_gpu_healthy", one) == 1
    assert get("gpuwarden_gpu_healthy", two) == 0
    assert get("gpuwarden_gpu_memory_used_bytes", two) is None  # not sampled: no series
    assert get("gpuwarden_gpu_slices", two) == 0


def test_every_family_is_prefixed_and_never_labelled_by_pid() -> None:
    allowed = {"namespace", "pod", "container", "gpu_uuid", "source", "check", "policy_rule",
               "alert", "severity", "action", "version", "digest", "index", "model"}
    gpu = GpuRow("GPU-1", 0, "m", 1, 1, 0.1, 1, 0.1, 1, True)
    for fam in registry(view(gpus=(gpu,))).collect():
        assert fam.name.startswith("gpuwarden_"), fam.name
        for s in fam.samples:
            assert set(s.labels) <= allowed, (s.name, s.labels)


def test_healthz_and_metrics_over_http() -> None:
    current = [view()]
    reg = registry(current[0])
    srv = MetricsServer(reg, lambda: current[0], port=0, clock=lambda: 1005.0)
    srv.start()
    try:
        base = f"http://127.0.0.1:{srv.port}"
        with urllib.request.urlopen(base + "/healthz") as r:
            doc = json.load(r)
        assert doc["ok"] and doc["ebpf"] == "off: bcc missing"
        with urllib.request.urlopen(base + "/metrics") as r:
            assert b"gpuwarden_violations_total{" in r.read()
        current[0] = view(last_loop_ts=900.0)  # loop stalled for 105 s
        try:
            urllib.request.urlopen(base + "/healthz")
            raise AssertionError("a stale loop must answer 503")
        except urllib.error.HTTPError as err:
            assert err.code == 503 and not json.load(err)["loop_fresh"]
    finally:
        srv.close()


def test_metrics_negotiate_gzip_and_openmetrics() -> None:
    """prometheus_client's own serving: gzip when asked, OpenMetrics when Prometheus asks."""
    import gzip

    current = view()
    srv = MetricsServer(registry(current), lambda: current, port=0, clock=lambda: 1005.0)
    srv.start()
    try:
        url = f"http://127.0.0.1:{srv.port}/metrics"
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            assert b"gpuwarden_violations_total{" in gzip.decompress(r.read())
        req = urllib.request.Request(url, headers={
            "Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            assert r.read().rstrip().endswith(b"# EOF")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/nothing")
            raise AssertionError("an unknown path must answer 404")
        except urllib.error.HTTPError as err:
            assert err.code == 404
    finally:
        srv.close()
