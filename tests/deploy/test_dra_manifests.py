"""deploy/dra renders with kustomize and agrees with the code: the driver's arguments parse with
the real CLI, its RBAC grants what draplugin.kube calls, its nodes are never the device plugin's,
and the DeviceClasses select the driver's devices."""

from __future__ import annotations

import shutil
import subprocess

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
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["args"])
    assert args.handler.__name__ == "cmd_draplugin"
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
    assert grants == {("resourceclaims", "get"), ("resourceslices", "get"),
                      ("resourceslices", "create"), ("resourceslices", "update"),
                      ("resourceslices", "delete")}
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
