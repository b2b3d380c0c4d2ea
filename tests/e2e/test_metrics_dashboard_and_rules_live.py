"""Against a live agent on the simulated GPU, with a workload and a violation: every series
that the Grafana dashboard, the alert rules and the HAMi recording rules read is one the
agent's /metrics really shows (or a rule records), and the HAMi rules, fed the scrape, give
HAMi's series for the GPU and the workload."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from agent_harness import REPO, AgentProc
from prometheus_client.parser import text_string_to_metric_families
from promql_names import dashboard_exprs, metric_names, rule_exprs
from testbed import wait_for

ALERTS = REPO / "examples" / "alerts"
DASHBOARD = REPO / "examples" / "grafana" / "gpuwarden-dashboard.json"

pytestmark = [pytest.mark.slow]


def _wait_metric(agent: AgentProc, name: str, labels: dict[str, str]) -> None:
    """A series in the agent's scrape (the scrape shown if it never comes)."""
    wait_for(lambda: agent.metric(name, labels) is not None, 30, f"{name}{labels} in /metrics",
             interval=0.1, detail=lambda: agent.get("/metrics")[1])


@pytest.fixture
def live_scrape(start_agent, gpu_job: Path) -> str:
    agent: AgentProc = start_agent("--no-ebpf")
    within = agent.run(["--namespace", "ml", "--name", "within", "--gpumem", "1GiB",
                        "--gpucores", "30"], [gpu_job, "256", "20000"])
    bypass = agent.run(["--namespace", "watch", "--name", "bypass", "--gpumem", "1GiB"],
                       [gpu_job, "--bypass", "256", "20000"])
    try:
        _wait_metric(agent, "gpuwarden_workload_memory_used_bytes",
                     {"pod": "within", "source": "shim"})
        _wait_metric(agent, "gpuwarden_violations_total", {"pod": "bypass", "check": "bypass"})
        _wait_metric(agent, "gpuwarden_gpu_memory_used_bytes", {})
        _wait_metric(agent, "gpuwarden_workload_compute_used_ratio", {"pod": "within"})
        return agent.get("/metrics")[1]
    finally:
        for p in (within, bypass):
            p.kill()
            p.communicate(timeout=30)


def test_dashboard_and_rules_name_only_live_series(live_scrape: str) -> None:
    live = {s.name for fam in text_string_to_metric_families(live_scrape) for s in fam.samples}
    recorded: set[str] = set()
    read: dict[str, set[str]] = {}
    for f in ("gpuwarden.rules.yml", "hami-compat.rules.yml"):
        rec, exprs = rule_exprs(ALERTS / f)
        recorded |= rec
        for e in exprs:
            read.setdefault(f, set()).update(metric_names(e))
    for e in dashboard_exprs(DASHBOARD):
        read.setdefault(DASHBOARD.name, set()).update(metric_names(e))
    assert len(read[DASHBOARD.name]) >= 20
    for where, names in read.items():
        assert names <= live | recorded, (where, sorted(names - live - recorded))


def _series(scrape: str) -> list[dict[str, str]]:
    out = []
    for fam in text_string_to_metric_families(scrape):
        for s in fam.samples:
            labels = ",".join('{}="{}"'.format(k, v.replace("\\", "\\\\").replace('"', '\\"'))
                              for k, v in sorted(s.labels.items()))
            out.append({"series": f"{s.name}{{{labels}}}", "values": f"{s.value}x3"})
    return out


def test_hami_recording_rules_work_on_the_live_scrape(live_scrape: str, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`, scripts/setup.sh)")

    def count(expr: str, n: int) -> dict[str, object]:
        return {"expr": f"count({expr})", "eval_time": "1m",
                "exp_samples": [{"labels": "{}", "value": n}]}

    test = {"rule_files": [str(ALERTS / "hami-compat.rules.yml")], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": _series(live_scrape),
                       "promql_expr_test": [
                           count("HostGPUMemoryUsage", 1), count("HostCoreUtilization", 1),
                           count('vGPU_device_memory_usage_in_bytes{podname="within",'
                                 'podnamespace="ml",ctrname="main"}', 1),
                           count('vGPU_device_memory_limit_in_bytes{podname="within"} '
                                 "== 1073741824", 1),
                           count('Device_utilization_desc_of_container{podname="within"}', 1),
                           count("GPUDeviceSharedNum == 2", 1),
                           count("GPUDeviceCoreAllocated == 30", 1)]}]}
    (tmp_path / "live.test.yml").write_text(yaml.safe_dump(test))
    done = subprocess.run([promtool, "test", "rules", "live.test.yml"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
