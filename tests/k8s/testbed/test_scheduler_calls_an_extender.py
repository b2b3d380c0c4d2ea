"""The test bed's real kube-scheduler, restarted with an `extenders:` configuration, asks a
scheduler extender on 127.0.0.1 to filter nodes for pods that want its resource, and follows
its answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from testbed import images
from testbed.kube import core, pod_manifest, wait_for

pytestmark = pytest.mark.k8s

RESOURCE = "example.com/slice"


class _Extender(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[str, str, list[str]]]] = []
    keep = "ext-b"

    def do_POST(self) -> None:
        raw = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        args = {k.lower(): v for k, v in raw.items()}  # Go writes "Pod", "Nodes"...
        nodes = args["nodes"]["items"]
        names = [n["metadata"]["name"] for n in nodes]
        self.calls.append((self.path, args["pod"]["metadata"]["name"], names))
        kept = [n for n in nodes if n["metadata"]["name"] == self.keep]
        failed = {n: "the extender keeps only " + self.keep for n in names if n != self.keep}
        body = json.dumps({"nodes": {"items": kept}, "failedNodes": failed}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def extender(k8s_cluster) -> Iterator[type[_Extender]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Extender)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Extender.calls = []
    k8s_cluster.restart_scheduler({"extenders": [{
        "urlPrefix": f"http://127.0.0.1:{server.server_address[1]}",
        "filterVerb": "filter", "weight": 1, "enableHTTPS": False,
        "managedResources": [{"name": RESOURCE, "ignoredByScheduler": True}]}]})
    try:
        yield _Extender
    finally:
        k8s_cluster.restart_scheduler({})
        server.shutdown()
        server.server_close()


def test_scheduler_follows_the_extenders_filter(
        k8s_api, k8s_namespace, k8s_fake_node, extender) -> None:
    for name in ("ext-a", "ext-b"):
        k8s_fake_node(name, capacity={"cpu": "4", "memory": "8Gi", "pods": "10",
                                      RESOURCE: "10"})
    v1 = core(k8s_api)
    for i in range(3):
        v1.create_namespaced_pod(k8s_namespace, pod_manifest(
            f"sliced-{i}", images.BUSYBOX_IMAGE, ["true"],
            resources={"limits": {RESOURCE: "1"}}))
    for i in range(3):
        node = wait_for(lambda i=i: v1.read_namespaced_pod(f"sliced-{i}", k8s_namespace)
                        .spec.node_name, 20, f"pod sliced-{i} being bound")
        assert node == "ext-b"
    called = {pod for path, pod, _ in extender.calls if path == "/filter"}
    assert called == {"sliced-0", "sliced-1", "sliced-2"}
    assert all({"ext-a", "ext-b"} <= set(names) for _, _, names in extender.calls)
