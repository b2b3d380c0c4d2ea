"""Every component opens the Kubernetes API through gpuwarden.kubeclient: a `--kubeconfig` that
is missing or not a kubeconfig, or no credentials at all, is an error naming the file (or where
it looked) and what would do, and the command exits 2 with it instead of a traceback or the
client's bare "Invalid kube-config file. No configuration found."."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuwarden.kubeclient import KubeConfigError, api_client

REPO = Path(__file__).resolve().parents[2]

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: abc}
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
"""


@pytest.fixture
def outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


def test_a_missing_kubeconfig_file_is_named_with_what_would_do(tmp_path: Path) -> None:
    path = tmp_path / "admin.conf"
    with pytest.raises(KubeConfigError) as err:
        api_client(str(path))
    assert str(err.value).startswith(f"--kubeconfig {path}: no such file")
    assert "service account" in str(err.value)


@pytest.mark.parametrize("text, says", [
    ("clusters: [", "while parsing"),  # not YAML
    ("apiVersion: v1\nkind: Config\n", "current-context"),  # no context to use
])
def test_a_kubeconfig_that_is_not_one_is_named_with_why(tmp_path: Path, text: str,
                                                        says: str) -> None:
    path = tmp_path / "admin.conf"
    path.write_text(text)
    with pytest.raises(KubeConfigError) as err:
        api_client(str(path))
    message = str(err.value)
    assert message.startswith(f"--kubeconfig {path}: not a usable kubeconfig file"), message
    assert says in message and "\n" not in message, message


def test_no_credentials_anywhere_names_where_it_looked(tmp_path: Path, outside_a_pod: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = tmp_path / "none.conf"
    monkeypatch.setenv("KUBECONFIG", str(nowhere))
    with pytest.raises(KubeConfigError) as err:
        api_client(None)
    message = str(err.value)
    assert message.startswith("no Kubernetes credentials: not in a pod"), message
    assert str(nowhere) in message and "--kubeconfig PATH" in message, message


def test_a_kubeconfig_given_or_found_is_used(tmp_path: Path, outside_a_pod: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "admin.conf"
    path.write_text(KUBECONFIG)
    assert api_client(str(path)).configuration.host == "https://127.0.0.1:6443"
    monkeypatch.setenv("KUBECONFIG", str(path))  # run by hand on a node: $KUBECONFIG
    assert api_client(None).configuration.host == "https://127.0.0.1:6443"


def test_the_extender_exits_2_naming_a_missing_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "admin.conf"
    done = subprocess.run([sys.executable, "-m", "gpuwarden", "extender", "--kubeconfig",
                           str(path)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines() == [
        f"gpuwarden extender: cannot reach the Kubernetes API: --kubeconfig {path}: no such "
        "file; give the path of a kubeconfig file, or leave the flag out to use the pod's "
        "service account (in a cluster) or $KUBECONFIG / ~/.kube/config"], done.stderr
