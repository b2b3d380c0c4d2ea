"""resource.k8s.io/v1 objects for the DRA tests: the example classes and templates, claims and
slices read back as JSON, and the sums the scheduler keeps per device."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gpuwarden.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "dra"
DEPLOY_DRA = REPO / "deploy" / "dra"
GROUP, V = "resource.k8s.io", "v1"


def objects(api: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def examples(name: str, folder: Path = EXAMPLES) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((folder / name).read_text()) if d]


def create_classes(api: Any) -> list[str]:
    """The DeviceClasses of deploy/dra (those that exist already are kept); the names made."""
    made = []
    for doc in examples("deviceclasses.yaml", DEPLOY_DRA):
        try:
            objects(api).create_cluster_custom_object(GROUP, V, "deviceclasses", doc)
            made.append(doc["metadata"]["name"])
        except client.ApiException as err:
            if err.status != 409:
                raise
    return made


def delete_classes(api: Any, names: Iterable[str]) -> None:
    for name in names:
        objects(api).delete_cluster_custom_object(GROUP, V, "deviceclasses", name)


def template(api: Any, namespace: str, name: str = "gpu-1g-10", memory: str | None = None,
             cores: str | None = None) -> str:
    """The example template gpu-1g-10 in `namespace`, under `name`, with other sizes."""
    doc = copy.deepcopy(next(d for d in examples("claimtemplates.yaml")
                             if d["metadata"]["name"] == "gpu-1g-10"))
    doc["metadata"]["name"] = name
    requests = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"]["requests"]
    if memory is not None:
        requests["memory"] = memory
    if cores is not None:
        requests["cores"] = cores
    objects(api).create_namespaced_custom_object(GROUP, V, namespace, "resourceclaimtemplates",
                                                 doc)
    return name


def claims(api: Any, namespace: str) -> list[dict[str, Any]]:
    return list(objects(api).list_namespaced_custom_object(GROUP, V, namespace,
                                                           "resourceclaims")["items"])


def allocated(cs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in cs if (c.get("status") or {}).get("allocation")]


def consumed(cs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Fraction]]:
    """(pool, device) -> the sums of memory and cores its allocations consume."""
    used: dict[tuple[str, str], dict[str, Fraction]] = {}
    for c in allocated(cs):
        for r in c["status"]["allocation"]["devices"]["results"]:
            t = used.setdefault((r["pool"], r["device"]), {"memory": Fraction(0),
                                                            "cores": Fraction(0)})
            for k in t:
                t[k] += parse_quantity(r["consumedCapacity"][k], k)
    return used


def pod_with_claim(pod: dict[str, Any], tpl: str) -> dict[str, Any]:
    """`pod` (one container) given a claim made from template `tpl`."""
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tpl}]
    c = pod["spec"]["containers"][0]
    c.setdefault("resources", {})["claims"] = [{"name": "gpu"}]
    return pod
