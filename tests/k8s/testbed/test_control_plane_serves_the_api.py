"""The test bed's control plane: a real apiserver (with authentication and RBAC), scheduler and
controller-manager answering on 127.0.0.1."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client
from testbed import ControlPlane
from testbed.kube import ApiException, api_client, core, service_account_client, wait_for

pytestmark = pytest.mark.k8s


def test_control_plane_is_ready_with_the_system_namespaces(k8s_cluster) -> None:
    assert k8s_cluster.url.startswith("https://127.0.0.1:")
    names = {ns["metadata"]["name"] for ns in k8s_cluster.get_json("/api/v1/namespaces")["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_client_certificate_names_the_user_and_groups(k8s_cluster) -> None:
    api = api_client(k8s_cluster.kubeconfig_for("alice", ["team-a", "team-b"]))
    review = client.AuthenticationV1Api(api).create_self_subject_review(
        client.V1SelfSubjectReview())
    user = review.status.user_info
    assert user.username == "alice"
    assert {"team-a", "team-b", "system:authenticated"} <= set(user.groups)


def test_service_account_token_is_held_to_rbac(k8s_api, k8s_namespace) -> None:
    sa_api = service_account_client(k8s_api, k8s_namespace, "reader")
    with pytest.raises(ApiException) as refused:
        core(sa_api).list_namespaced_pod(k8s_namespace)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{k8s_namespace}:reader" in refused.value.body

    rbac = client.RbacAuthorizationV1Api(k8s_api)
    rbac.create_namespaced_role(k8s_namespace, {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(k8s_namespace, {
        "metadata": {"name": "pod-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader",
                      "namespace": k8s_namespace}]})
    # the authorizer's cache catches up with the new binding within moments
    assert wait_for(lambda: core(sa_api).list_namespaced_pod(k8s_namespace) is not None, 10,
                    "the ServiceAccount listing pods once bound to a Role")


def test_controller_manager_runs_replica_sets(k8s_api, k8s_namespace) -> None:
    apps = client.AppsV1Api(k8s_api)
    labels = {"app": "rs-test"}
    apps.create_namespaced_replica_set(k8s_namespace, {
        "metadata": {"name": "rs"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "none:1"}]}}}})
    pods = wait_for(lambda: len(core(k8s_api).list_namespaced_pod(k8s_namespace).items) == 2,
                    20, "the ReplicaSet controller creating 2 pods")
    assert pods


def test_a_port_taken_before_binding_means_a_new_try(monkeypatch: pytest.MonkeyPatch) -> None:
    import testbed.controlplane as controlplane
    from testbed.procs import free_ports

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        calls: list[list[int]] = []

        def first_one_taken(count: int) -> list[int]:
            ports = free_ports(count)
            if not calls:
                ports[0] = port  # etcd's client port, as if another run took it meanwhile
            calls.append(ports)
            return ports

        monkeypatch.setattr(controlplane, "free_ports", first_one_taken)
        cp = ControlPlane.start()
        try:
            assert len(calls) == 2 and cp.etcd_url.endswith(f":{calls[1][0]}")
            assert "default" in {n["metadata"]["name"]
                                 for n in cp.get_json("/api/v1/namespaces")["items"]}
        finally:
            cp.stop()
