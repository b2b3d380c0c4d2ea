"""Which pod container a process runs in, from the text of its /proc/PID/cgroup.

Pure: a function of the file's text. The kubelet names a pod's cgroup after the pod's UID and the
container runtime names the container's cgroup after the container id, in one of these shapes:

- cgroupfs driver (cgroup v1 and v2): `.../kubepods/<qos>/pod<uid>/<id>`; CRI-O writes
  `crio-<id>` as the last part, containerd and Docker the bare id;
- systemd driver: `.../kubepods-<qos>-pod<uid with _ for ->.slice/<prefix>-<id>.scope` with the
  prefix `cri-containerd`, `crio` or `docker` (CRI-O may add a `/container` level below);
- cgroup v1 lists one line per hierarchy (`4:memory:/...`), v2 one line (`0::/...`); a kubelet
  inside a container (kind) adds parts in front and a `kubelet-` prefix to the slices.

CRI-O's `crio-conmon-<id>` is the monitor process beside the container, not the container.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ContainerRef", "bare_container_id", "container_of"]

_UID = r"[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}"
_POD_CGROUPFS = re.compile(rf"^pod({_UID})$")
_POD_SYSTEMD = re.compile(rf"^(?:[a-z0-9]+-)*kubepods(?:-[a-z]+)?-pod({_UID})\.slice$")
_CONTAINER = re.compile(r"^(?:(?:cri-containerd|crio|docker)-)?([0-9a-f]{64})(?:\.scope)?$")


@dataclass(frozen=True)
class ContainerRef:
    pod_uid: str  # as in metadata.uid (with dashes)
    container_id: str  # the runtime's id, without the `containerd://` scheme


def _from_path(path: str) -> ContainerRef | None:
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts[:-1]):
        m = _POD_CGROUPFS.match(part) or _POD_SYSTEMD.match(part)
        if m is None:
            continue
        c = _CONTAINER.match(parts[i + 1])
        if c is None:
            return None  # the pod's own cgroup level, or a conmon: not a container
        return ContainerRef(m.group(1).replace("_", "-").lower(), c.group(1))
    return None


def container_of(cgroup_text: str) -> ContainerRef | None:
    """The pod container of a process, or None when its cgroups are not a pod container's."""
    for line in cgroup_text.splitlines():
        _hier, sep, rest = line.partition(":")
        _controllers, sep2, path = rest.partition(":")
        if not (sep and sep2):
            continue
        ref = _from_path(path)
        if ref is not None:
            return ref
    return None


def bare_container_id(status_id: str) -> str:
    """`containerd://abc…` (a pod's containerStatuses[].containerID) -> `abc…`."""
    return status_id.partition("://")[2] or status_id
