"""deploy/ renders with kustomize, and what it holds agrees with the code: every gpuwarden
container's arguments parse with the real CLI, the policy passes the CI gate, the settings load,
the scheduler manages our resource names, the PrometheusRule is the tested one, and the
Dockerfile copies every package."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from manifests import DEPLOY, REPO, find, rendered

from gpuwarden.cli import build_parser
from gpuwarden.config import parse_settings
from gpuwarden.resources import ResourceNames


def test_kustomize_renders_every_component_in_its_namespace():
    docs = rendered()
    for kind, name in [("DaemonSet", "gpuwarden-node"), ("Deployment", "gpuwarden-extender"),
                       ("Deployment", "gpuwarden-scheduler"), ("ConfigMap", "gpuwarden-policy"),
                       ("ConfigMap", "gpuwarden-settings"), ("ServiceMonitor", "gpuwarden-agent"),
                       ("PrometheusRule", "gpuwarden"),
                       ("MutatingWebhookConfiguration", "gpuwarden"),
                       ("Service", "gpuwarden-extender"), ("Service", "gpuwarden-agent-metrics")]:
        find(kind, name)
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                      "MutatingWebhookConfiguration"}
    for d in docs:
        if d["kind"] not in cluster_scoped:
            assert d["metadata"].get("namespace") == "gpuwarden-system", d["metadata"]


def _gpuwarden_containers():
    for d in rendered():
        spec = d.get("spec", {}).get("template", {}).get("spec")
        if not spec:
            continue
        for c in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            if c["image"].startswith("ghcr.io/gpuwarden/") and c.get("args"):
                yield d["metadata"]["name"], c


def test_container_arguments_parse_with_the_gpuwarden_cli():
    parser = build_parser()
    known = set(parser._subparsers._group_actions[0].choices)  # registered subcommands
    parsed = []
    for owner, c in _gpuwarden_containers():
        if c["args"][0] not in known:
            continue  # a component not on this branch yet (checked by the next test)
        args = parser.parse_args(c["args"])
        assert getattr(args, "handler", None) is not None, (owner, c["name"])
        parsed.append(c["args"][0])
    assert "agent" in parsed


def test_every_gpuwarden_container_runs_a_known_component():
    commands = {c["args"][0] for _, c in _gpuwarden_containers()}
    assert commands == {"agent", "deviceplugin", "extender"}


def test_the_agent_runs_in_cluster_mode_with_the_policy_volume_and_host_pids():
    ds = find("DaemonSet", "gpuwarden-node")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["serviceAccountName"] == "gpuwarden-node"
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    assert "--kubernetes" in agent["args"]
    mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/gpuwarden/policy"]]["configMap"]["name"] == "gpuwarden-policy"
    for path in ("/sys/kernel/tracing", "/lib/modules", "/usr/src", "/var/lib/gpuwarden",
                 "/run/gpuwarden"):
        assert "hostPath" in volumes[mounts[path]], path
    plugin = next(c for c in pod["containers"] if c["name"] == "device-plugin")
    pmounts = {m["mountPath"] for m in plugin["volumeMounts"]}
    assert {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources",
            "/var/lib/gpuwarden", "/usr/local/gpuwarden/lib"} <= pmounts


def test_the_policy_configmap_is_not_hashed_so_edits_hot_reload():
    cm = find("ConfigMap", "gpuwarden-policy")
    assert cm["metadata"]["name"] == "gpuwarden-policy" and "cluster.gwp" in cm["data"]


@pytest.mark.parametrize("cmd", [
    ["policy", "check", str(DEPLOY / "policy")],
    ["policy", "test", str(DEPLOY / "policy" / "tests")],
    ["policy", "fmt", "--check", str(DEPLOY / "policy")],
], ids=["check", "test", "fmt"])
def test_the_deployed_policy_passes_the_ci_gate(cmd):
    out = subprocess.run([sys.executable, "-m", "gpuwarden", *cmd], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_settings_configmap_loads():
    cm = find("ConfigMap", "gpuwarden-settings")
    s = parse_settings(cm["data"]["config.yaml"], "gpuwarden-settings/config.yaml")
    assert s.scheduler_name == "gpuwarden-scheduler"
    # the agent looks for the regions where the device plugin makes them
    pod = find("DaemonSet", "gpuwarden-node")["spec"]["template"]["spec"]
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    assert f"--regions-root={s.region_root}" in agent["args"]
    mounts = {m["mountPath"] for m in agent["volumeMounts"]}
    assert any(s.region_root.startswith(m + "/") for m in mounts)


def test_the_scheduler_sends_our_resources_to_the_extender():
    cm = find("ConfigMap", "gpuwarden-scheduler-config")
    conf = yaml.safe_load(cm["data"]["config.yaml"])
    settings = parse_settings(find("ConfigMap", "gpuwarden-settings")["data"]["config.yaml"])
    assert [p["schedulerName"] for p in conf["profiles"]] == [settings.scheduler_name]
    [ext] = conf["extenders"]
    names = ResourceNames()
    managed = {r["name"]: r["ignoredByScheduler"] for r in ext["managedResources"]}
    assert set(managed) == {getattr(names, f) for f in ResourceNames.field_names()}
    assert managed[names.gpu] is False  # the node advertises slices: the scheduler counts them
    svc = find("Service", "gpuwarden-extender")
    port = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "extender")
    assert ext["urlPrefix"] == f"http://gpuwarden-extender.gpuwarden-system.svc:{port}"


def test_the_prometheusrule_is_the_promtool_tested_one():
    deployed = find("PrometheusRule", "gpuwarden")
    example = yaml.safe_load((REPO / "examples/alerts/prometheusrule.yaml").read_text())
    assert deployed["spec"] == example["spec"], (
        "deploy/monitoring/prometheusrule.yaml differs from examples/alerts/prometheusrule.yaml "
        "(the one tests/agent/alerts checks): copy it over")


def test_the_dockerfile_copies_every_package_and_builds_libvgpu():
    text = (DEPLOY / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (?!--from)(\S+) ", text, re.M))
    for src in copied:
        assert (REPO / src).exists(), f"deploy/Dockerfile copies {src}, which does not exist"
    pyproject = (REPO / "pyproject.toml").read_text()
    packages = re.search(r'include = \[([^\]]*)\]', pyproject).group(1)
    for pkg in re.findall(r'"(\w+)\*"', packages):
        assert pkg in copied, f"deploy/Dockerfile does not copy the package {pkg}"
    assert "make -C libvgpu" in text and "/opt/gpuwarden/lib/libvgpu.so" in text
    ds = find("DaemonSet", "gpuwarden-node")
    init = ds["spec"]["template"]["spec"]["initContainers"][0]
    assert "/opt/gpuwarden/lib/libvgpu.so" in " ".join(init["command"])
