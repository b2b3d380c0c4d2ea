"""The alert and recording rules pass `promtool test rules`; the PrometheusRule carries exactly
the same groups and its inner rules pass `promtool check rules`; every alert a policy names
fires with the policy's name and severity; every gpuwarden_ metric a rule uses is one the
exporter really produces."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent.exporter import AgentCollector, GpuRow, Row, View
from agent.model import ViolationLabels, WorkloadKey
from policy import load_policy
from policy.alerts import policy_alerts

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "examples" / "alerts"
# policy-alerts.rules.yml is the alternative to GpuwardenPolicyAlert (alerts named as the
# example policies name them), so the PrometheusRule carries the other two only.
OPERATOR_FILES = ("gpuwarden.rules.yml", "hami-compat.rules.yml")
RULE_FILES = (*OPERATOR_FILES, "policy-alerts.rules.yml")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`, scripts/setup.sh)")
    return found


@pytest.mark.parametrize("test_file", ["gpuwarden.test.yml", "hami-compat.test.yml"])
def test_promtool_unit_tests_pass(test_file: str) -> None:
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", *(str(ALERTS / f) for f in RULE_FILES)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run([tool, "test", "rules", test_file],
                          cwd=ALERTS / "tests", capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_prometheusrule_has_the_same_groups() -> None:
    groups = [g for f in OPERATOR_FILES
              for g in yaml.safe_load((ALERTS / f).read_text())["groups"]]
    manifest = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["spec"]["groups"] == groups


def test_prometheusrule_inner_rules_pass_promtool_check(tmp_path: Path) -> None:
    """promtool reads plain rule files only; the CRD's spec is one."""
    tool = promtool()
    spec = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())["spec"]
    inner = tmp_path / "prometheusrule.spec.yml"
    inner.write_text(yaml.safe_dump(spec))
    done = subprocess.run([tool, "check", "rules", str(inner)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def example_alerts() -> set[tuple[str, str, str]]:
    """(rule, alert name, severity) for every on_violation in the example policies."""
    policy = load_policy([REPO / "examples" / "policies"]).policy
    assert policy is not None
    return {(rule, alert, severity) for alert, givers in policy_alerts(policy).items()
            for rule, severity in givers}


def exported(view: View) -> str:
    reg = CollectorRegistry()
    reg.register(AgentCollector(lambda: view))
    return generate_latest(reg).decode()


def test_every_policy_alert_fires_with_its_name_and_severity(tmp_path: Path) -> None:
    """The exporter's own violation series for each alert of examples/policies, fed to the
    shipped rules: GpuwardenPolicyAlert fires once per policy alert, with its severity."""
    tool = promtool()
    alerts = example_alerts()
    assert len(alerts) >= 5 and ("training", "TrainingOverGpuSlice", "critical") in alerts
    counts = {ViolationLabels(WorkloadKey("ns", f"pod{i}"), "GPU-1", "memory", rule, alert, sev): 1
              for i, (rule, alert, sev) in enumerate(sorted(alerts))}
    series = []
    for fam in text_string_to_metric_families(exported(View(violations_total=counts))):
        for s in fam.samples:
            if s.name == "gpuwarden_violations_total":
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                series.append({"series": f"{s.name}{{{labels}}}", "values": "0 1 1 1"})
    assert len(series) == len(alerts)
    expected = [{"exp_labels": {"alert": alert, "severity": sev, "policy_rule": rule,
                                "check": "memory", "namespace": "ns", "pod": f"pod{i}",
                                "container": "main", "gpu_uuid": "GPU-1"},
                 "exp_annotations": {
                     "summary": f"{alert}: ns/pod{i} failed the memory check on GPU GPU-1 "
                                f"(policy rule {rule})",
                     "description": f"The policy's rule {rule} names this alert ({alert}, "
                                    f"severity {sev}). The agent's audit events (event "
                                    "violation) hold the evidence per source and the action "
                                    "taken."}}
                for i, (rule, alert, sev) in enumerate(sorted(alerts))]
    named = [{"eval_time": "2m", "alertname": alert, "exp_alerts": [
        {"exp_labels": e["exp_labels"], "exp_annotations": {
            "summary": e["exp_annotations"]["summary"].split(": ", 1)[1],
            "description": f"Given by the policy's {rule} ({sev}). The agent's audit events "
                           "(event violation) hold the evidence and the action taken."}}
        for e, (rule, alert2, sev) in zip(expected, sorted(alerts), strict=True)
        if alert2 == alert]} for alert in sorted({a for _, a, _ in alerts})]
    test = {"rule_files": [str(ALERTS / "gpuwarden.rules.yml"),
                           str(ALERTS / "policy-alerts.rules.yml")],
            "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": "2m", "alertname": "GpuwardenPolicyAlert",
                                            "exp_alerts": expected}, *named]}]}
    (tmp_path / "policy_alerts.test.yml").write_text(yaml.safe_dump(test))
    done = subprocess.run([tool, "test", "rules", "policy_alerts.test.yml"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_shipped_policy_alerts_are_generated_from_the_example_policies() -> None:
    import contextlib
    import io

    from gpuwarden.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["policy", "alerts", str(REPO / "examples" / "policies")]) == 0
    shipped = (ALERTS / "policy-alerts.rules.yml").read_text()
    assert out.getvalue().split("\n", 2)[2] == shipped.split("\n", 2)[2], (
        "regenerate: gpuwarden policy alerts examples/policies > "
        "examples/alerts/policy-alerts.rules.yml")


def test_rules_use_only_exported_metrics() -> None:
    k = WorkloadKey("n", "p")
    view = View(version="x", policy_digest="d",
                rows=(Row(k, "G", 1, {"shim": 1, "ebpf": 1, "nvml": 1}, 0.1, 0.2, True),),
                gpus=(GpuRow("G", 0, "sim", 10, 5, 0.5, 1, 0.2, 1, True),),
                violations_total={ViolationLabels(k, "G", "bypass", "r", "A", "critical"): 1},
                actions_total={(k, "kill"): 1})
    names = {s.name for fam in text_string_to_metric_families(exported(view))
             for s in fam.samples}
    for f in RULE_FILES:
        used = set(re.findall(r"\b(gpuwarden_[a-z_]+)", (ALERTS / f).read_text()))
        assert used and used <= names, (f, used - names)
