"""A pod from the API server -> the agent's GPU container workloads: what the policy matches on
is exactly what `gpuwarden policy explain` builds from the same manifest."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from agent.cluster import record_of
from agent.pods import PodError, container_region, pod_containers
from policy import load_policy
from policy.pods import workloads_from_manifest

ROOT = Path(__file__).resolve().parents[3]
UID = "0f7e2c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
CID = "ab" * 32
NODE_LABELS = {"gpu": "h200", "topology.kubernetes.io/zone": "z1"}


def served(manifest, running=("trainer",), assignment=None):
    """The manifest as the API server returns it once bound and running."""
    pod = copy.deepcopy(manifest)
    pod["metadata"]["uid"] = UID
    pod["metadata"].setdefault("annotations", {})["team.example/cost-center"] = "42"
    if assignment is not None:
        pod["metadata"]["annotations"]["gpuwarden.io/assignment"] = json.dumps(assignment)
    pod["spec"]["nodeName"] = "gpu-node-1"
    pod["status"] = {"phase": "Running", "containerStatuses": [
        {"name": c["name"], "containerID": f"containerd://{CID}",
         "state": {"running": {"startedAt": "2026-12-01T06:00:00Z"}}}
        for c in pod["spec"]["containers"] if c["name"] in running]}
    return pod


@pytest.fixture
def training():
    return yaml.safe_load((ROOT / "examples/pods/training.yaml").read_text())


def test_the_gpu_container_gets_the_workload_policy_explain_builds(training):
    pod = served(training)
    [pc] = pod_containers(pod, NODE_LABELS, "/var/lib/gpuwarden/containers")
    [explained] = workloads_from_manifest(pod, "x", node_labels=NODE_LABELS, gpu_only=True)
    assert pc.workload == explained.workload
    assert pc.workload.annotations["team.example/cost-center"] == "42"
    assert pc.workload.node == "gpu-node-1" and pc.workload.node_labels == NODE_LABELS
    assert pc.wid == f"{UID}_trainer" and pc.container_id == CID


def test_the_agent_record_evaluates_to_the_same_rule_as_explain(training):
    pod = served(training)
    [pc] = pod_containers(pod, NODE_LABELS, "/r")
    rec = record_of(pc, 0.0)
    assert rec.policy_workload("gpu-node-1") == pc.workload
    policy = load_policy([ROOT / "examples/policies"]).policy
    assert policy.evaluate(rec.policy_workload("gpu-node-1")) == policy.evaluate(pc.workload)


def test_region_is_the_device_plugins_folder_for_the_container(training):
    [pc] = pod_containers(served(training), {}, "/var/lib/gpuwarden/containers")
    assert pc.region == f"/var/lib/gpuwarden/containers/{UID}_trainer/vgpu.region"
    assert Path(pc.region) == container_region("/var/lib/gpuwarden/containers", UID, "trainer")


def test_devices_come_from_the_extenders_assignment(training):
    assignment = {"version": 1, "node": "gpu-node-1", "rule": "", "containers": [
        {"name": "trainer", "init": False, "devices": [
            {"uuid": "GPU-1", "index": 1, "memoryMiB": 30000, "cores": 60}]}]}
    [pc] = pod_containers(served(training, assignment=assignment), {}, "/r")
    assert pc.devices == ("GPU-1",)


def test_a_container_not_running_yet_has_no_container_id(training):
    [pc] = pod_containers(served(training, running=()), {}, "/r")
    assert pc.container_id == ""


def test_finished_pods_have_no_workloads(training):
    pod = served(training)
    pod["status"]["phase"] = "Succeeded"
    assert pod_containers(pod, {}, "/r") == []


def test_a_broken_assignment_is_named(training):
    pod = served(training)
    pod["metadata"]["annotations"]["gpuwarden.io/assignment"] = "{not json"
    with pytest.raises(PodError, match=r"pod ml-train/resnet-train: annotation "
                                       r"gpuwarden.io/assignment: is not valid JSON"):
        pod_containers(pod, {}, "/r")


def test_a_bad_resource_value_is_named_with_the_pod(training):
    pod = served(training)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = "lots"
    with pytest.raises(PodError, match=r"pod ml-train/resnet-train: container \"trainer\""):
        pod_containers(pod, {}, "/r")
