"""deploy/dra renders with kustomize and agrees with the code: the driver's arguments parse with
the real CLI, its RBAC grants what draplugin.kube calls, its nodes are never the device plugin's,
and the DeviceClasses select the driver's devices."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from manifests import DEPLOY, find

from draplugin.core import DRIVER
from gpuwarden.cli import build_parser


def rendered_dra() -> list[dict]:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is not on PATH (scripts/setup.sh checks for it)"
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / "dra")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def of(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def test_the_driver_arguments_parse_and_its_nodes_are_not_the_device_plugins() -> None:
    docs = rendered_dra()
    (ds,) = of(docs, "DaemonSet")
    assert ds["metadata"]["namespace"] == "gpuwarden-system"
    containers = {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}
    c = containers["draplugin"]
    args = build_parser().parse_args(c["args"])
    assert args.handler.__name__ == "cmd_draplugin"
    # the agent beside it reads the claims' folders under the driver's region root
    agent = build_parser().parse_args(containers["agent"]["args"])
    assert agent.handler.__name__ == "cmd_agent" and agent.kubernetes
    assert agent.regions_root == next(a.split("=", 1)[1] for a in c["args"]
                                      if a.startswith("--region-root="))
    node_agent = next(x for x in find("DaemonSet", "gpuwarden-node")["spec"]["template"]["spec"]
                      ["containers"] if x["name"] == "agent")
    assert containers["agent"]["args"] == node_agent["args"]
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {str(args.kubelet_root / "plugins_registry"), str(args.kubelet_root / "plugins"),
            str(args.cdi_dir)} <= mounts
    dra_sel = ds["spec"]["template"]["spec"]["nodeSelector"]
    node_sel = find("DaemonSet", "gpuwarden-node")["spec"]["template"]["spec"]["nodeSelector"]
    shared = set(dra_sel) & set(node_sel)
    assert shared and all(dra_sel[k] != node_sel[k] for k in shared), (dra_sel, node_sel)


def test_rbac_grants_what_the_driver_calls() -> None:
    docs = rendered_dra()
    (role,) = of(docs, "ClusterRole")
    grants = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert {g for g in grants if g[0].startswith("resource")} == {
        ("resourceclaims", "get"), ("resourceslices", "get"), ("resourceslices", "create"),
        ("resourceslices", "update")}
    # the agent's: its node's pods and Node, Events on pods; nothing more
    assert {g for g in grants if not g[0].startswith("resource")} == {
        ("pods", "get"), ("pods", "list"), ("pods", "watch"), ("nodes", "get"),
        ("nodes", "list"), ("nodes", "watch"), ("events", "create"), ("events", "patch")}
    (binding,) = of(docs, "ClusterRoleBinding")
    (ds,) = of(docs, "DaemonSet")
    assert binding["subjects"][0]["name"] == ds["spec"]["template"]["spec"]["serviceAccountName"]


def test_every_device_class_selects_healthy_devices_of_the_driver() -> None:
    classes = of(rendered_dra(), "DeviceClass")
    assert len(classes) == 3
    for c in classes:
        (sel,) = c["spec"]["selectors"]
        assert f'device.driver == "{DRIVER}"' in sel["cel"]["expression"]
        assert f'device.attributes["{DRIVER}"].healthy' in sel["cel"]["expression"]


@pytest.mark.k8s
def test_deploy_dra_passes_server_side_dry_run_and_its_account_can_do_its_calls(
        k8s_cluster) -> None:
    admin = k8s_cluster.admin_kubeconfig
    docs = rendered_dra()

    def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
        out = subprocess.run([shutil.which("kubectl") or "kubectl", f"--kubeconfig={admin}",
                              *args], input=stdin, capture_output=True, text=True, timeout=120)
        assert not check or out.returncode == 0, f"kubectl {' '.join(args)}:\n{out.stderr}"
        return out.stdout.strip()

    kubectl("create", "namespace", "gpuwarden-system", check=False)
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole",
                                             "ClusterRoleBinding")]
    kubectl("apply", "--server-side", "-f", "-",
            stdin="\n---\n".join(yaml.safe_dump(d) for d in rbac))
    kubectl("apply", "--dry-run=server", "-f", "-",
            stdin="\n---\n".join(yaml.safe_dump(d) for d in docs))
    sa = "system:serviceaccount:gpuwarden-system:gpuwarden-dra"
    for verb, what in [("get", "resourceclaims.resource.k8s.io"),
                       ("create", "resourceslices.resource.k8s.io"),
                       ("update", "resourceslices.resource.k8s.io"),
                       ("watch", "pods"), ("create", "events")]:
        assert kubectl("auth", "can-i", verb, what, "--all-namespaces", f"--as={sa}",
                       check=False) == "yes", (verb, what)
    assert kubectl("auth", "can-i", "delete", "pods", "--all-namespaces", f"--as={sa}",
                   check=False) == "no"


def test_the_agents_metrics_on_dra_nodes_are_scraped_like_the_others() -> None:
    docs = rendered_dra()
    (svc,) = of(docs, "Service")
    (ds,) = of(docs, "DaemonSet")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    monitor = find("ServiceMonitor", "gpuwarden-agent")["spec"]["selector"]["matchLabels"]
    assert all(svc["metadata"]["labels"].get(k) == v for k, v in monitor.items())
    port = svc["spec"]["ports"][0]["targetPort"]
    agent = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "agent")
    assert port in {p["name"] for p in agent["ports"]}
