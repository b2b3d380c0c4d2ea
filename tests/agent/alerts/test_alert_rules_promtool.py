"""The alert rules pass `promtool test rules`; the PrometheusRule carries exactly the same
groups; every gpuwarden_ metric a rule uses is one the exporter really produces."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agent.exporter import AgentCollector, Row, View
from agent.model import WorkloadKey

ALERTS = Path(__file__).resolve().parents[3] / "examples" / "alerts"


def test_promtool_unit_tests_pass() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    check = subprocess.run([promtool, "check", "rules", str(ALERTS / "gpuwarden.rules.yml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run([promtool, "test", "rules", "gpuwarden.test.yml"],
                          cwd=ALERTS / "tests", capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_prometheusrule_has_the_same_groups() -> None:
    plain = yaml.safe_load((ALERTS / "gpuwarden.rules.yml").read_text())
    manifest = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["spec"]["groups"] == plain["groups"]


def test_rules_use_only_exported_metrics() -> None:
    k = WorkloadKey("n", "p")
    view = View(version="x", policy_digest="d",
                rows=(Row(k, "G", 1, {"shim": 1, "ebpf": 1, "nvml": 1}, 0.1, 0.2, True),),
                violations_total={(k, "G", "bypass"): 1}, actions_total={(k, "kill"): 1})
    exported = {s.name for fam in AgentCollector(lambda: view).collect() for s in fam.samples}
    text = (ALERTS / "gpuwarden.rules.yml").read_text()
    used = set(re.findall(r"\b(gpuwarden_[a-z_]+)", text))
    assert used and used <= exported, used - exported
