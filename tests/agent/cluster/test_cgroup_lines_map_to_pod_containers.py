"""/proc/PID/cgroup text -> (pod UID, container id), for the layouts kubelets and runtimes write."""

import pytest

from agent.cgroups import ContainerRef, bare_container_id, container_of

UID = "0f7e2c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
UID_ = UID.replace("-", "_")
CID = "3b1f9c0e" * 8

V1_CGROUPFS_CONTAINERD = "\n".join([
    "12:hugetlb:/kubepods/burstable/pod%s/%s" % (UID, CID),
    "11:memory:/kubepods/burstable/pod%s/%s" % (UID, CID),
    "10:cpu,cpuacct:/kubepods/burstable/pod%s/%s" % (UID, CID),
    "1:name=systemd:/kubepods/burstable/pod%s/%s" % (UID, CID),
    "0::/",
])
V1_CGROUPFS_GUARANTEED = "4:memory:/kubepods/pod%s/%s\n3:pids:/kubepods/pod%s/%s\n" % (
    UID, CID, UID, CID)
V1_CGROUPFS_CRIO = "9:memory:/kubepods/besteffort/pod%s/crio-%s\n" % (UID, CID)
V1_SYSTEMD_CONTAINERD = (
    "7:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
    "cri-containerd-%s.scope\n" % (UID_, CID))
V2_SYSTEMD_CONTAINERD = (
    "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice/"
    "cri-containerd-%s.scope\n" % (UID_, CID))
V2_SYSTEMD_GUARANTEED_CRIO = (
    "0::/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope/container\n" % (UID_, CID))
V2_CGROUPFS = "0::/kubepods/burstable/pod%s/%s\n" % (UID, CID)
V2_KIND_NESTED = (
    "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
    "kubelet-kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n" % (UID_, CID))
V1_DOCKER_NESTED = "5:memory:/docker/%s/kubepods/burstable/pod%s/%s\n" % ("ab" * 32, UID, CID)


@pytest.mark.parametrize("text", [
    V1_CGROUPFS_CONTAINERD, V1_CGROUPFS_GUARANTEED, V1_CGROUPFS_CRIO, V1_SYSTEMD_CONTAINERD,
    V2_SYSTEMD_CONTAINERD, V2_SYSTEMD_GUARANTEED_CRIO, V2_CGROUPFS, V1_DOCKER_NESTED,
], ids=["v1-cgroupfs-containerd", "v1-cgroupfs-guaranteed", "v1-cgroupfs-crio",
        "v1-systemd-containerd", "v2-systemd-containerd", "v2-systemd-crio-guaranteed",
        "v2-cgroupfs", "v1-docker-nested"])
def test_container_cgroups_give_the_pod_uid_and_container_id(text):
    assert container_of(text) == ContainerRef(UID, CID)


def test_kind_nested_systemd_slices_with_a_kubelet_prefix_are_pods_too():
    assert container_of(V2_KIND_NESTED) == ContainerRef(UID, CID)


@pytest.mark.parametrize("text", [
    "",
    "0::/init.scope\n",
    "0::/system.slice/containerd.service\n",
    "11:memory:/user.slice/user-0.slice/session-3.scope\n",
    "4:memory:/kubepods/burstable/pod%s\n" % UID,  # the pod level itself (pause parent)
    "0::/kubepods.slice/kubepods-pod%s.slice/crio-conmon-%s.scope\n" % (UID_, CID),
    "garbage without colons\n",
], ids=["empty", "init", "runtime", "session", "pod-level", "crio-conmon", "garbage"])
def test_processes_outside_a_pod_container_map_to_nothing(text):
    assert container_of(text) is None


def test_uppercase_uid_is_normalised_like_metadata_uid():
    text = "0::/kubepods/pod%s/%s\n" % (UID.upper(), CID)
    assert container_of(text) == ContainerRef(UID, CID)


@pytest.mark.parametrize("status_id", [f"containerd://{CID}", f"cri-o://{CID}",
                                       f"docker://{CID}", CID])
def test_status_container_ids_lose_their_runtime_scheme(status_id):
    assert bare_container_id(status_id) == CID
