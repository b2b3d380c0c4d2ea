"""/proc/PID/cgroup text -> (pod UID, container id), for the layouts kubelets and runtimes write."""

import pytest

from agent.cgroups import ContainerRef, bare_container_id, container_of

UID = "0f7e2c4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
UID_ = UID.replace("-", "_")
CID = "3b1f9c0e" * 8

V1_CGROUPFS_CONTAINERD = "\n".join([
    f"12:hugetlb:/kubepods/burstable/pod{UID}/{CID}",
    f"11:memory:/kubepods/burstable/pod{UID}/{CID}",
    f"10:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}",
    f"1:name=systemd:/kubepods/burstable/pod{UID}/{CID}",
    "0::/",
])
V1_CGROUPFS_GUARANTEED = f"4:memory:/kubepods/pod{UID}/{CID}\n3:pids:/kubepods/pod{UID}/{CID}\n"
V1_CGROUPFS_CRIO = f"9:memory:/kubepods/besteffort/pod{UID}/crio-{CID}\n"
V1_SYSTEMD_CONTAINERD = (
    f"7:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
    f"cri-containerd-{CID}.scope\n")
V2_SYSTEMD_CONTAINERD = (
    f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
    f"cri-containerd-{CID}.scope\n")
V2_SYSTEMD_GUARANTEED_CRIO = (
    f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{CID}.scope/container\n")
V2_CGROUPFS = f"0::/kubepods/burstable/pod{UID}/{CID}\n"
V2_KIND_NESTED = (
    "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
    f"kubelet-kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope\n")
V1_DOCKER_NESTED = "5:memory:/docker/{}/kubepods/burstable/pod{}/{}\n".format("ab" * 32, UID, CID)


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
    f"4:memory:/kubepods/burstable/pod{UID}\n",  # the pod level itself (pause parent)
    f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{CID}.scope\n",
    "garbage without colons\n",
], ids=["empty", "init", "runtime", "session", "pod-level", "crio-conmon", "garbage"])
def test_processes_outside_a_pod_container_map_to_nothing(text):
    assert container_of(text) is None


def test_uppercase_uid_is_normalised_like_metadata_uid():
    text = f"0::/kubepods/pod{UID.upper()}/{CID}\n"
    assert container_of(text) == ContainerRef(UID, CID)


@pytest.mark.parametrize("status_id", [f"containerd://{CID}", f"cri-o://{CID}",
                                       f"docker://{CID}", CID])
def test_status_container_ids_lose_their_runtime_scheme(status_id):
    assert bare_container_id(status_id) == CID
