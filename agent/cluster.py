"""Cluster mode (`gpuwarden agent --kubernetes`): what the daemon asks of Kubernetes.

The daemon's workloads are then the GPU containers of the pods on its node (agent.pods over the
pod watcher's cache) rather than `gpuwarden run` admissions; processes are given to them by their
cgroup (agent.cgroups) instead of an environment marker; audit records about a pod also become
Events on that pod. This module holds the state that needs (which process is in which
container, which pid it has in its own namespace) and reads /proc for it; the API I/O sits in
agent.kubeapi; gpuwarden.informer keeps the pods of the node and the Node itself current.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agent.cgroups import ContainerRef, container_of
from agent.ledger import WorkloadRecord
from agent.pods import REGION_FILE, PodContainer, PodError, pod_containers, pod_event
from agent.procfs import start_time
from gpuwarden.claims import (
    CLAIM_RECORD,
    CLAIMS_DIR,
    ClaimRecord,
    ClaimRecordError,
    decode_claim_record,
)
from gpuwarden.config import DEFAULT_REGION_ROOT
from gpuwarden.informer import Informer, stop_all
from gpuwarden.resources import ResourceNames

__all__ = ["ClusterMode", "ns_pid", "record_of"]

DEFAULT_REGIONS_ROOT = DEFAULT_REGION_ROOT  # the device plugin's setting `regionRoot`


def record_of(pc: PodContainer, created: float) -> WorkloadRecord:
    """The agent's record of a pod container: what the policy matches on, exactly as the pod's
    manifest gives it (record.policy_workload(node) == pc.workload)."""
    w = pc.workload
    return WorkloadRecord(
        wid=pc.wid, namespace=w.namespace, name=w.name, container=w.container,
        labels=dict(w.labels), annotations=dict(w.annotations),
        node_labels=dict(w.node_labels), pod_uid=pc.pod_uid, container_id=pc.container_id,
        request=asdict(w.request), region=pc.region, devices=list(pc.devices),
        created=created)


def ns_pid(status_text: str) -> int | None:
    """The innermost pid of a process from /proc/PID/status ("NSpid:\t4242\t7" -> 7)."""
    for line in status_text.splitlines():
        if line.startswith("NSpid:"):
            parts = line.split()[1:]
            return int(parts[-1]) if parts and parts[-1].isdigit() else None
    return None


class ClusterMode:
    PENDING_GRACE_S = 30.0  # a pod process whose container the pod status does not list yet

    def __init__(self, pods: Informer, node_obj: Informer, node: str,
                 regions_root: str | Path, names: ResourceNames | None = None,
                 post_event: Any = None, proc_root: str | Path = "/proc",
                 sync_timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pods = pods  # the pods bound to this node
        self.node_obj = node_obj  # this node's Node object (its labels)
        self.node = node
        self.regions_root = Path(regions_root)
        self.names = names or ResourceNames()
        self.events = post_event  # agent.kubeapi.EventWriter (put/close) or None
        self.proc_root = Path(proc_root)
        self.sync_timeout_s = sync_timeout_s
        self.clock = clock
        self._changed = threading.Event()
        self._refs: dict[int, tuple[int, ContainerRef | None]] = {}  # pid -> (start, ref)
        self._ns: dict[int, tuple[int, int]] = {}  # host pid -> (start, namespace pid)
        self._pending: dict[int, float] = {}  # pid -> first seen unresolved
        self._pod_names: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self.bad_pods: dict[str, str] = {}  # uid -> why it cannot be read (reported once)
        # uid -> (resourceVersion, its GPU containers or why it cannot be read)
        self._read_pods: dict[str, tuple[str, list[PodContainer] | str]] = {}
        self._labels_seen: dict[str, str] | None = None
        self._claims_seen: dict[tuple[str, str], list[tuple[ClaimRecord, str]]] | None = None
        self._claim_files: dict[str, tuple[float, ClaimRecord | None]] = {}  # path -> mtime

    def claim_index(self) -> dict[tuple[str, str], list[tuple[ClaimRecord, str]]]:
        """The DRA driver's prepared claim units under <regions root>/claims/, by (namespace,
        claim name), with their region files; each record is read again only when it
        changes, an unreadable one is skipped."""
        out: dict[tuple[str, str], list[tuple[ClaimRecord, str]]] = {}
        folder = self.regions_root / CLAIMS_DIR
        try:
            units = sorted(os.listdir(folder))
        except OSError:
            return out
        seen: dict[str, tuple[float, ClaimRecord | None]] = {}
        for unit in units:
            path = folder / unit / CLAIM_RECORD
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            hit = self._claim_files.get(str(path))
            if hit is None or hit[0] != mtime:
                try:
                    hit = (mtime, decode_claim_record(path.read_text(), str(path)))
                except (OSError, ClaimRecordError):
                    hit = (mtime, None)
            seen[str(path)] = hit
            if hit[1] is not None:
                out.setdefault((hit[1].namespace, hit[1].name), []).append(
                    (hit[1], str(folder / unit / REGION_FILE)))
        self._claim_files = seen
        return out

    # ---- the watch ---------------------------------------------------------------------------

    def start(self, wake: Callable[[], None]) -> bool:
        """Start watching; wait for the first lists. False when they did not come in time."""

        def changed(_type: str, _old: Any, _new: Any) -> None:
            self._changed.set()
            wake()

        deadline = self.clock() + self.sync_timeout_s
        for inf in (self.node_obj, self.pods):
            inf.on_event = changed
            inf.start()
        return all(inf.synced.wait(max(0.0, deadline - self.clock()))
                   for inf in (self.node_obj, self.pods))

    @property
    def synced(self) -> bool:
        return self.pods.synced.is_set() and self.node_obj.synced.is_set()

    def take_changed(self) -> bool:
        if self._changed.is_set():
            self._changed.clear()
            return True
        return False

    def node_labels(self) -> dict[str, str]:
        for n in self.node_obj.items():
            if (n.get("metadata") or {}).get("name") == self.node:
                return {str(k): str(v) for k, v in
                        ((n.get("metadata") or {}).get("labels") or {}).items()}
        return {}

    def desired(self) -> dict[str, PodContainer]:
        """Every GPU container of the node's pods, by workload id; unreadable pods are kept in
        bad_pods with the reason (the daemon reports each once). A pod is read again only when
        its resourceVersion (or the node's labels) changed."""
        labels = self.node_labels()
        claims = self.claim_index()
        if labels != self._labels_seen or claims != self._claims_seen:
            self._labels_seen, self._claims_seen, self._read_pods = labels, claims, {}
        out: dict[str, PodContainer] = {}
        bad: dict[str, str] = {}
        cache: dict[str, tuple[str, list[PodContainer] | str]] = {}
        for pod in self.pods.items():
            meta = pod.get("metadata") or {}
            uid = str(meta.get("uid", ""))
            rv = str(meta.get("resourceVersion", ""))
            hit = self._read_pods.get(uid)
            if hit is None or hit[0] != rv or not rv:
                self._pod_names[uid] = (str(meta.get("namespace", "")),
                                        str(meta.get("name", "")))
                try:
                    hit = (rv, pod_containers(pod, labels, self.regions_root, self.names,
                                              claims))
                except PodError as err:
                    hit = (rv, str(err))
            cache[uid] = hit
            if isinstance(hit[1], str):
                bad[uid] = hit[1]
            else:
                out.update((pc.wid, pc) for pc in hit[1])
        self._read_pods = cache
        self.bad_pods = bad
        if len(self._pod_names) > 20000:  # names of long-gone pods
            self._pod_names = {u: n for u, n in self._pod_names.items() if u in cache}
        return out

    # ---- processes ---------------------------------------------------------------------------

    def _read(self, pid: int, name: str) -> str | None:
        try:
            return (self.proc_root / str(pid) / name).read_text()
        except OSError:
            return None

    def container(self, pid: int, start: int | None = None) -> ContainerRef | None:
        """The pod container `pid` runs in (cached per pid and start time)."""
        st = start if start is not None else start_time(pid, self.proc_root)
        if st is None:
            return None
        hit = self._refs.get(pid)
        if hit is not None and hit[0] == st:
            return hit[1]
        text = self._read(pid, "cgroup")
        ref = container_of(text) if text is not None else None
        if len(self._refs) > 65536:
            self._refs.clear()
        self._refs[pid] = (st, ref)
        return ref

    def scan(self, skip: Container[int]) -> list[tuple[int, int, ContainerRef]]:
        """Live processes in pod containers, except the pids in `skip`: (pid, start, ref).
        Only processes new since the last scan are read (a reused pid is caught where it
        matters: container() checks the start time of every process seen on a GPU)."""
        out: list[tuple[int, int, ContainerRef]] = []
        try:
            names = os.listdir(self.proc_root)
        except OSError:
            return out
        live = set()
        for name in names:
            if not name.isdigit():
                continue
            pid = int(name)
            live.add(pid)
            if pid in skip:
                continue
            hit = self._refs.get(pid)
            if hit is None:
                st = start_time(pid, self.proc_root)
                if st is None:
                    continue
                hit = (st, self.container(pid, st))
            if hit[1] is not None:
                out.append((pid, hit[0], hit[1]))
        for pid in [p for p in self._refs if p not in live]:
            self._refs.pop(pid, None)
            self._ns.pop(pid, None)
            self._pending.pop(pid, None)
        return out

    def ns_pids(self, pids: Mapping[int, int]) -> dict[int, tuple[int, int]]:
        """host pid -> (namespace pid, start) for `pids` (host pid -> start time)."""
        out = {}
        for pid, st in pids.items():
            hit = self._ns.get(pid)
            if hit is None or hit[0] != st:
                text = self._read(pid, "status")
                inner = ns_pid(text) if text is not None else None
                if inner is None:
                    continue
                hit = self._ns[pid] = (st, inner)
            out[pid] = (hit[1], st)
        return out

    def pending(self, pid: int, now: float) -> bool:
        """A pod process not (yet) given to a workload: spared while the pod cache is not
        synced, and for PENDING_GRACE_S while the pod status may still lag the container."""
        first = self._pending.setdefault(pid, now)
        return not self.synced or now - first < self.PENDING_GRACE_S

    def resolved(self, pid: int) -> None:
        self._pending.pop(pid, None)

    # ---- events ------------------------------------------------------------------------------

    def on_audit(self, record: Mapping[str, Any]) -> None:
        if self.events is None:
            return
        body = pod_event(record, self._pod_names, self.node)
        if body is not None:
            self.events.put(body)

    def close(self) -> None:
        stop_all((self.pods, self.node_obj), wait_s=1.0)
        if self.events is not None:
            with contextlib.suppress(Exception):
                self.events.close()
