"""The device plugin's gRPC edge: serves v1beta1.DevicePlugin on a unix socket in the kubelet's
device-plugins folder, registers with the kubelet once serving, and serves and registers again
when the kubelet restarts (its socket is recreated and ours deleted).

The servicer only translates: matching a request to a pod and planning what the container gets
are deviceplugin.allocation's pure functions; Kubernetes, NVML and the PodResources API are
injected edges.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import grpc

from deviceplugin.allocation import (
    AllocationError,
    ContainerPlan,
    HostPaths,
    Match,
    PodView,
    match_pod,
    plan_container,
    preferred,
    preload_text,
)
from deviceplugin.api import device_plugin, pod_resources
from deviceplugin.devices import DeviceIdError, PhysicalGpu, advertise, gpus_of, node_inventory
from deviceplugin.kube import Cluster
from deviceplugin.regionfiles import write_region
from gpuwarden.annotations import (
    ALLOCATED,
    ASSIGNMENT,
    BIND_PHASE,
    HAMI_BIND_PHASE,
    HAMI_NODE_REGISTER,
    NODE_GPUS,
    decode_assignment,
    encode_allocated,
    encode_hami_register,
    encode_node_gpus,
)
from gpuwarden.config import Settings

__all__ = ["DevicePlugin", "Inventory", "PluginOptions", "PodResourcesClient"]

API_VERSION = "v1beta1"


class Inventory(Protocol):
    def read(self) -> tuple[PhysicalGpu, ...]: ...

    def wait_xid(self, timeout_ms: int) -> bool: ...  # False: no events to wait on


@dataclass(frozen=True)
class PluginOptions:
    node: str
    plugin_dir: Path = Path("/var/lib/kubelet/device-plugins")
    kubelet_socket: Path | None = None  # default: <plugin_dir>/kubelet.sock
    socket_name: str = "gpuwarden.sock"
    pod_resources_socket: Path | None = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    libvgpu: str = "/usr/local/gpuwarden/lib/libvgpu.so"  # host path
    health_seconds: float = 5.0
    watch_seconds: float = 0.1  # how often the kubelet's socket is checked
    maintenance_seconds: float = 30.0  # node annotation refresh, region clean-up

    @property
    def kubelet_sock(self) -> Path:
        return self.kubelet_socket or self.plugin_dir / "kubelet.sock"


class PodResourcesClient:
    """Which pod's container holds which devices, from the kubelet's PodResources API."""

    def __init__(self, socket_path: Path, resource: str) -> None:
        self.path, self.resource = socket_path, resource

    def owner(self, device_ids: Sequence[str]) -> tuple[str, str, str] | None:
        """(namespace, pod, container) holding all of device_ids; None when the API is not
        there. Raises AllocationError when no container holds them."""
        if not self.path.exists():
            return None
        api = pod_resources()
        want = set(device_ids)
        with grpc.insecure_channel(f"unix://{self.path}") as ch:
            resp = api.grpc.PodResourcesListerStub(ch).List(api.pb.ListPodResourcesRequest(),
                                                           timeout=5)
        for pod in resp.pod_resources:
            for c in pod.containers:
                ids = {i for d in c.devices if d.resource_name == self.resource
                       for i in d.device_ids}
                if ids and ids == want:
                    return (pod.namespace, pod.name, c.name)
        raise AllocationError(f"the kubelet's PodResources lists no container holding "
                              f"{sorted(want)}")


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class DevicePlugin:
    def __init__(self, settings: Settings, opts: PluginOptions, inventory: Inventory,
                 cluster: Cluster, pod_resources_client: PodResourcesClient | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.settings, self.opts = settings, opts
        self.inventory, self.cluster = inventory, cluster
        self.podres = pod_resources_client
        self.log = log or (lambda msg: print(f"gpuwarden deviceplugin: {msg}", file=sys.stderr,
                                             flush=True))
        self.resource = settings.resource_names.gpu
        root = Path(settings.region_root)
        self.paths = HostPaths(libvgpu=opts.libvgpu, preload_file=str(root / "ld.so.preload"),
                               region_root=str(root), node_dir=str(root / "node"))
        self.gpus: tuple[PhysicalGpu, ...] = ()
        self.version = 0  # bumped on every change of the advertised devices
        self.changed = threading.Condition()
        self.alloc_lock = threading.Lock()
        self.allocated: dict[frozenset[str], ContainerPlan] = {}  # device IDs -> plan
        self.stopping = threading.Event()
        self.server: grpc.Server | None = None
        self.registrations = 0
        self._threads: list[threading.Thread] = []
        self._kubelet_inode: tuple[int, int] | None = None
        self._next_maintenance = 0.0

    # ---- devices ------------------------------------------------------------------------------

    @property
    def by_uuid(self) -> dict[str, PhysicalGpu]:
        return {g.uuid: g for g in self.gpus}

    def refresh(self) -> bool:
        """Read the GPUs; on a change, wake ListAndWatch and republish the node annotations."""
        gpus = self.inventory.read()
        if gpus == self.gpus:
            return False
        for g in gpus:
            old = self.by_uuid.get(g.uuid)
            if old is not None and old.healthy != g.healthy:
                self.log(f"GPU {g.uuid} is now {'healthy' if g.healthy else 'unhealthy'}"
                         f"{': ' + g.why_unhealthy if g.why_unhealthy else ''}")
        with self.changed:
            self.gpus = gpus
            self.version += 1
            self.changed.notify_all()
        self.publish()
        return True

    def publish(self) -> None:
        inv = node_inventory(self.gpus, self.settings, _now_rfc3339())
        try:
            self.cluster.annotate_node(self.opts.node, {NODE_GPUS: encode_node_gpus(inv),
                                                        HAMI_NODE_REGISTER:
                                                            encode_hami_register(inv)})
        except Exception as err:
            self.log(f"cannot annotate node {self.opts.node} with its GPUs: {err}")

    def _list_response(self) -> Any:
        pb = device_plugin().pb
        devs = []
        for s in advertise(self.gpus, self.settings.device_split_count):
            d = pb.Device(ID=s.id, health="Healthy" if s.healthy else "Unhealthy")
            if s.numa >= 0:
                d.topology.nodes.add(ID=s.numa)
            devs.append(d)
        return pb.ListAndWatchResponse(devices=devs)

    # ---- the DevicePlugin service -------------------------------------------------------------

    @staticmethod
    def options() -> Any:
        """PreStartContainer is required (it checks the kubelet's choice of pod); preferred
        allocation is offered."""
        return device_plugin().pb.DevicePluginOptions(pre_start_required=True,
                                                      get_preferred_allocation_available=True)

    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        return self.options()

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
        seen = -1
        while not self.stopping.is_set() and context.is_active():
            with self.changed:
                if self.version == seen:
                    self.changed.wait(0.5)
                if self.version == seen:
                    continue
                seen, resp = self.version, self._list_response()
            yield resp

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        pb = device_plugin().pb
        order = [g.uuid for g in sorted(self.gpus, key=lambda g: g.index)]
        out = []
        for creq in request.container_requests:
            try:
                ids = preferred(list(creq.available_deviceIDs), list(creq.must_include_deviceIDs),
                                int(creq.allocation_size), order,
                                self.settings.gpu_scheduler_policy,
                                self._hint(int(creq.allocation_size)))
            except DeviceIdError as err:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))
            out.append(pb.ContainerPreferredAllocationResponse(deviceIDs=list(ids)))
        return pb.PreferredAllocationResponse(container_responses=out)

    def _hint(self, size: int) -> tuple[str, ...]:
        """The GPUs assigned to the longest-waiting allocating pod whose next container needs
        `size` GPUs, so that the kubelet's IDs name the GPUs the container will use."""
        try:
            pods = self.cluster.pods_on_node(self.opts.node)
        except Exception:
            return ()
        best: tuple[float, tuple[str, ...]] | None = None
        for p in pods:
            if p.annotations.get(BIND_PHASE) != "allocating" or ASSIGNMENT not in p.annotations:
                continue
            with contextlib.suppress(Exception):
                done = set(p.allocated())
                for c in decode_assignment(p.annotations[ASSIGNMENT]).containers:
                    if c.devices and c.name not in done:
                        if len(c.devices) == size and (best is None or p.created < best[0]):
                            best = (p.created, tuple(d.uuid for d in c.devices))
                        break
        return best[1] if best else ()

    def Allocate(self, request: Any, context: Any) -> Any:
        try:
            return self.allocate([list(c.devices_ids) for c in request.container_requests])
        except AllocationError as err:
            self.log(f"Allocate refused: {err}")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))

    def PreStartContainer(self, request: Any, context: Any) -> Any:
        try:
            self.pre_start(list(request.devices_ids))
        except AllocationError as err:
            self.log(f"PreStartContainer refused: {err}")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))
        return device_plugin().pb.PreStartContainerResponse()

    # ---- Allocate and PreStartContainer, without gRPC -----------------------------------------

    def allocate(self, requests: Sequence[Sequence[str]]) -> Any:
        """Plan every container of the request, then apply all (region folders, pod
        annotations) or nothing; raises AllocationError naming the pod and why. The pods come
        from the watch cache; when they do not match, from a fresh list (the extender's
        assignment may be newer than the cache)."""
        pb = device_plugin().pb
        with self.alloc_lock:
            try:
                plans, pods = self._plan(requests, fresh=False)
            except AllocationError:
                plans, pods = self._plan(requests, fresh=True)
            self._apply(plans, pods)
            for ids, plan in zip(requests, plans, strict=True):
                self.allocated[frozenset(ids)] = plan
        for plan in plans:
            self.log(f"allocated {plan.pod.ref} container {plan.container}: "
                     f"{', '.join(f'{g.uuid} {g.memory_mib} MiB {g.cores}%' for g in plan.grants)}")
        return pb.AllocateResponse(container_responses=[self._response(p) for p in plans])

    def _pods(self, fresh: bool) -> dict[str, PodView]:
        """The node's pods, each with the containers this plugin allocated added to its
        `allocated` annotation (the cache may not show the plugin's own last patch yet)."""
        try:
            listed = self.cluster.pods_on_node(self.opts.node, fresh=fresh)
        except Exception as err:
            raise AllocationError(f"cannot list the pods of node {self.opts.node}: {err}"
                                  ) from None
        mine: dict[str, list[str]] = {}
        for plan in self.allocated.values():
            mine.setdefault(plan.pod.uid, []).append(plan.container)
        pods = {}
        for p in listed:
            if p.uid in mine:
                done = encode_allocated([*p.allocated(), *mine[p.uid]])
                p = replace(p, annotations={**p.annotations, ALLOCATED: done})
            pods[p.uid] = p
        return pods

    def _plan(self, requests: Sequence[Sequence[str]], fresh: bool,
              ) -> tuple[list[ContainerPlan], dict[str, PodView]]:
        pods = self._pods(fresh)
        plans: list[ContainerPlan] = []
        for ids in requests:
            m = match_pod(list(pods.values()), self.opts.node, ids, self.by_uuid, self.settings)
            plan = plan_container(m, self.by_uuid, self.settings, self.paths)
            plans.append(plan)
            done = [*m.pod.allocated(), plan.container]
            pods[m.pod.uid] = replace(m.pod, annotations={**m.pod.annotations,
                                                          ALLOCATED: encode_allocated(done)})
        return plans, pods

    def _response(self, plan: ContainerPlan) -> Any:
        pb = device_plugin().pb
        return pb.ContainerAllocateResponse(
            envs=dict(plan.envs),
            mounts=[pb.Mount(container_path=m.container_path, host_path=m.host_path,
                             read_only=m.read_only) for m in plan.mounts])

    def _apply(self, plans: Sequence[ContainerPlan], pods: Mapping[str, PodView]) -> None:
        created: list[Path] = []
        try:
            for plan in plans:
                created += self._write_region(plan)
            for uid in dict.fromkeys(p.pod.uid for p in plans):
                pod = pods[uid]
                patch: dict[str, str | None] = {ALLOCATED: pod.annotations[ALLOCATED]}
                if ASSIGNMENT in pod.annotations:
                    want = {c.name for c in decode_assignment(pod.annotations[ASSIGNMENT])
                            .containers if c.devices}
                    if want <= set(pod.allocated()):
                        patch[BIND_PHASE] = patch[HAMI_BIND_PHASE] = "success"
                self.cluster.annotate_pod(pod.namespace, pod.name, patch)
        except AllocationError:
            self._undo(created)
            raise
        except Exception as err:
            self._undo(created)
            who = ", ".join(dict.fromkeys(p.pod.ref for p in plans))
            raise AllocationError(f"pod {who}: cannot record the allocation ({err}); nothing "
                                  "was applied") from None

    def _undo(self, created: Sequence[Path]) -> None:
        for path in reversed(created):
            shutil.rmtree(path, ignore_errors=True)

    def _write_region(self, plan: ContainerPlan) -> list[Path]:
        """Create the container's region folder and region with its limits, or write the
        limits again into an existing region; returns what it created, for undo."""
        folder = Path(plan.region_dir)
        cores = [0 if self.settings.disable_core_limit else g.cores for g in plan.grants]
        devices = [(g.uuid, lim) for g, lim in zip(plan.grants, plan.limits, strict=True)]
        try:
            return write_region(folder, devices, cores)
        except Exception as err:
            raise AllocationError(f"pod {plan.pod.ref} container {plan.container!r}: cannot "
                                  f"write its region in {folder}: {err}") from None

    def pre_start(self, device_ids: Sequence[str]) -> None:
        """Check, through the kubelet's PodResources API, that these devices went to the
        container Allocate set up, and write its limits into its region before it starts."""
        try:
            gpus_of(device_ids, self.by_uuid)
        except DeviceIdError as err:
            raise AllocationError(str(err)) from None
        plan = self.allocated.get(frozenset(device_ids))
        owner = None
        if self.podres is not None:
            try:
                owner = self.podres.owner(device_ids)
            except grpc.RpcError as err:
                self.log(f"PodResources unavailable ({err.code()}); {list(device_ids)} not "
                         "verified")
        if plan is None:
            if owner is None:
                return  # allocated before this plugin started; its region was written then
            plan = self._plan_for(owner, device_ids)
            if plan is None:
                return
        if owner is not None and owner != (plan.pod.namespace, plan.pod.name, plan.container):
            raise AllocationError(
                f"devices {list(device_ids)} were set up for pod {plan.pod.ref} container "
                f"{plan.container!r}, but the kubelet gave them to pod {owner[0]}/{owner[1]} "
                f"container {owner[2]!r}; refusing to start it with another pod's limits")
        self._write_region(plan)
        self.log(f"PreStartContainer {list(device_ids)}: pod {plan.pod.ref} container "
                 f"{plan.container} " + ("verified through PodResources" if owner is not None
                                          else "not verified (no PodResources)"))

    def _plan_for(self, owner: tuple[str, str, str], device_ids: Sequence[str],
                  ) -> ContainerPlan | None:
        for p in self.cluster.pods_on_node(self.opts.node, fresh=True):
            if (p.namespace, p.name) == owner[:2] and ASSIGNMENT in p.annotations:
                c = decode_assignment(p.annotations[ASSIGNMENT]).container(owner[2])
                if c is not None:
                    return plan_container(Match(p, c, True), self.by_uuid, self.settings,
                                          self.paths)
        return None

    # ---- serving and registration -------------------------------------------------------------

    @property
    def socket_path(self) -> Path:
        return self.opts.plugin_dir / self.opts.socket_name

    def _prepare_host(self) -> None:
        root = Path(self.paths.region_root)
        Path(self.paths.node_dir).mkdir(parents=True, exist_ok=True)
        os.chmod(self.paths.node_dir, 0o777)
        preload = Path(self.paths.preload_file)
        if not preload.exists() or preload.read_text() != preload_text():
            tmp = root / ".ld.so.preload.tmp"
            tmp.write_text(preload_text())
            os.chmod(tmp, 0o644)
            os.replace(tmp, preload)

    def serve(self) -> None:
        """(Re)start the gRPC server on our socket."""
        if self.server is not None:
            self.server.stop(grace=0.5).wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self.opts.plugin_dir.mkdir(parents=True, exist_ok=True)
        api = device_plugin()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                             options=[("grpc.so_reuseport", 0)])
        api.grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self.server = server

    def register(self) -> None:
        api = device_plugin()
        pb = api.pb
        with grpc.insecure_channel(f"unix://{self.opts.kubelet_sock}") as ch:
            api.grpc.RegistrationStub(ch).Register(pb.RegisterRequest(
                version=API_VERSION, endpoint=self.opts.socket_name, resource_name=self.resource,
                options=self.options()),
                timeout=5)
        self.registrations += 1
        self.log(f"registered {self.resource} ({len(self.gpus)} GPUs x "
                 f"{self.settings.device_split_count}) with the kubelet at "
                 f"{self.opts.kubelet_sock}")

    def _kubelet_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.opts.kubelet_sock)
        except OSError:
            return None
        return (st.st_ino, int(st.st_ctime_ns))

    def _watch_once(self) -> None:
        """Serve and register again when the kubelet's socket is new or ours is gone."""
        ident = self._kubelet_identity()
        if ident is None:
            self._kubelet_inode = None
            return
        if ident == self._kubelet_inode and self.socket_path.exists():
            return
        try:
            if not self.socket_path.exists() or self.server is None:
                self.serve()
            self.register()
            self._kubelet_inode = ident
        except Exception as err:
            self.log(f"cannot register with the kubelet at {self.opts.kubelet_sock}: {err}; "
                     "retrying")

    def start(self) -> DevicePlugin:
        self._prepare_host()
        self.refresh()
        self.publish()
        self.serve()
        self._watch_once()
        for name, target in (("watch", self._watch_loop), ("health", self._health_loop)):
            t = threading.Thread(target=target, name=f"deviceplugin-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _watch_loop(self) -> None:
        while not self.stopping.wait(self.opts.watch_seconds):
            self._watch_once()

    def _health_loop(self) -> None:
        while not self.stopping.is_set():
            # NVML's XID events wake it at once; without them, a poll every health_seconds
            if not self.inventory.wait_xid(int(self.opts.health_seconds * 1000)) and \
                    self.stopping.wait(self.opts.health_seconds):
                break
            try:
                self.refresh()
            except Exception as err:
                self.log(f"cannot read the GPUs: {err}")
            if time.monotonic() >= self._next_maintenance:
                self._next_maintenance = time.monotonic() + self.opts.maintenance_seconds
                self.maintain()

    def maintain(self) -> None:
        """Periodic: republish the node annotations, remove the region folders of pods that
        are gone (under the Allocate lock: a folder made after the list is never taken)."""
        self.publish()
        root = Path(self.paths.region_root)
        with self.alloc_lock:
            try:
                live = {p.uid for p in self.cluster.pods_on_node(self.opts.node, fresh=True)}
            except Exception as err:
                self.log(f"cannot list the pods of node {self.opts.node}: {err}")
                return
            for folder in root.iterdir() if root.is_dir() else ():
                uid, sep, _ = folder.name.partition("_")
                if not sep or not folder.is_dir() or uid in live:
                    continue
                self.allocated = {k: v for k, v in self.allocated.items() if v.pod.uid != uid}
                shutil.rmtree(folder, ignore_errors=True)
                self.log(f"removed the region folder of gone pod {uid}: {folder}")

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()
        if self.server is not None:
            self.server.stop(grace=1.0).wait()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
