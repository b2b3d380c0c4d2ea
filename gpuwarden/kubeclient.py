"""The one way every gpuwarden component opens the Kubernetes API: an `ApiClient` from the
`--kubeconfig` file it was given, else the pod's service account (in a cluster), else
$KUBECONFIG / ~/.kube/config (a component run by hand on a node).  What cannot be used is a
`KubeConfigError` that names the file or says what was looked for, for the component to print
and exit on, instead of the client's "Invalid kube-config file. No configuration found."
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["KubeConfigError", "api_client"]


class KubeConfigError(Exception):
    """No usable Kubernetes credentials; the message says where they were looked for."""


def api_client(kubeconfig: str | None = None) -> Any:
    """An ApiClient from `kubeconfig`, else the pod's service account, else $KUBECONFIG /
    ~/.kube/config; KubeConfigError when none of them can be used."""
    import yaml
    from kubernetes import client, config

    unusable = (config.ConfigException, yaml.YAMLError, OSError, ValueError, TypeError)
    if kubeconfig:
        if not Path(kubeconfig).is_file():
            raise KubeConfigError(
                f"--kubeconfig {kubeconfig}: no such file; give the path of a kubeconfig file, "
                "or leave the flag out to use the pod's service account (in a cluster) or "
                "$KUBECONFIG / ~/.kube/config")
        try:
            return config.new_client_from_config(config_file=kubeconfig)
        except unusable as err:
            raise KubeConfigError(
                f"--kubeconfig {kubeconfig}: not a usable kubeconfig file ({_oneline(err)}); it "
                "needs clusters, users, contexts and a current-context") from err
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException as in_cluster:
        where = os.environ.get("KUBECONFIG") or "~/.kube/config"  # read now, not at import
        try:
            return config.new_client_from_config(config_file=where)
        except unusable as err:
            raise KubeConfigError(
                f"no Kubernetes credentials: not in a pod ({_oneline(in_cluster)}), and no "
                f"usable kubeconfig at {where} ({_oneline(err)}); give --kubeconfig PATH") from err


def _oneline(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__
