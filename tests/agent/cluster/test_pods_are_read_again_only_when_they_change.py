"""Cluster mode reads a pod into GPU-container workloads once per resourceVersion; a change of
the pod, or of the node's labels (the policy matches on them), reads it again."""

import agent.cluster as cluster
from agent.cluster import ClusterMode
from gpuwarden.informer import Informer, Listed


class Fixed:
    def __init__(self, items):
        self.items = items

    def list(self):
        return Listed(self.items, "1")

    def watch(self, rv, timeout_s):
        return []


def pod(rv: str, mem: str = "1000"):
    return {"metadata": {"uid": "u1", "name": "p", "namespace": "ns", "resourceVersion": rv},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpumem": mem}}}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "containerID": "containerd://" + "a" * 64,
                 "state": {"running": {}}}]}}


def test_a_pod_is_read_once_per_version_and_again_after_a_node_label_change(monkeypatch):
    reads = []
    real = cluster.pod_containers

    def counting(p, labels, root, names, claims=None):
        reads.append((p["metadata"]["resourceVersion"], dict(labels)))
        return real(p, labels, root, names, claims)

    monkeypatch.setattr(cluster, "pod_containers", counting)
    pods = Fixed([pod("1")])
    node = Fixed([{"metadata": {"name": "n1", "labels": {"pool": "a"}, "resourceVersion": "1"}}])
    cm = ClusterMode(Informer("pods", pods), Informer("node", node), "n1", "/r")
    cm.pods.relist()
    cm.node_obj.relist()
    first = cm.desired()
    assert cm.desired() == first and len(reads) == 1

    pods.items = [pod("2", mem="2000")]
    cm.pods.relist()
    [pc] = cm.desired().values()
    assert pc.workload.request.gpumem_mib == 2000 and len(reads) == 2

    node.items = [{"metadata": {"name": "n1", "labels": {"pool": "b"}, "resourceVersion": "2"}}]
    cm.node_obj.relist()
    [pc] = cm.desired().values()
    assert pc.workload.node_labels == {"pool": "b"} and reads[-1] == ("2", {"pool": "b"})


def test_an_unreadable_pod_is_reported_until_it_changes():
    bad = pod("1", mem="lots")
    cm = ClusterMode(Informer("pods", Fixed([bad])), Informer("node", Fixed([])), "n1", "/r")
    cm.pods.relist()
    assert cm.desired() == {}
    assert "nvidia.com/gpumem" in cm.bad_pods["u1"] and "pod ns/p" in cm.bad_pods["u1"]
    cm.desired()
    assert "u1" in cm.bad_pods
