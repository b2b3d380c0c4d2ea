"""The DRA driver's edges: the kubelet plugin (registration socket in plugins_registry, the
DRAPlugin v1 service on its own socket), the node's ResourceSlice kept current, CDI spec files,
region folders and the checkpoint of prepared claims.

The servicers only translate: what a claim gets is draplugin.core's pure `plan_claim`; the API
server, NVML and the file system are injected or kept here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from deviceplugin.allocation import HostPaths, preload_text
from deviceplugin.devices import PhysicalGpu
from deviceplugin.regionfiles import write_region
from deviceplugin.server import Inventory
from draplugin.api import dra, registration
from draplugin.checkpoint import Checkpoint, PreparedClaim, PreparedDevice
from draplugin.core import (
    DRIVER,
    ClaimError,
    ClaimPlan,
    cdi_text,
    claim_record,
    plan_claim,
    resource_slice,
    same_devices,
)
from draplugin.kube import Resources
from gpuwarden.claims import CLAIM_RECORD, CLAIMS_DIR, encode_claim_record
from gpuwarden.config import Settings

__all__ = ["DraDriver", "DraOptions"]

SERVICE = "v1.DRAPlugin"


@dataclass(frozen=True)
class DraOptions:
    node: str
    kubelet_root: Path = Path("/var/lib/kubelet")
    cdi_dir: Path = Path("/var/run/cdi")
    state_dir: Path = Path("/var/lib/gpuwarden/dra")
    libvgpu: str = "/usr/local/gpuwarden/lib/libvgpu.so"
    driver: str = DRIVER
    health_seconds: float = 5.0
    resync_seconds: float = 5.0  # how often the slice and the registration socket are checked

    @property
    def registry_socket(self) -> Path:
        return self.kubelet_root / "plugins_registry" / f"{self.driver}-reg.sock"

    @property
    def plugin_socket(self) -> Path:
        return self.kubelet_root / "plugins" / self.driver / "dra.sock"


class DraDriver:
    def __init__(self, settings: Settings, opts: DraOptions, inventory: Inventory,
                 resources: Resources, log: Callable[[str], None] | None = None) -> None:
        self.settings, self.opts = settings, opts
        self.inventory, self.resources = inventory, resources
        self.log = log or (lambda msg: print(f"gpuwarden draplugin: {msg}", file=sys.stderr,
                                             flush=True))
        root = Path(settings.region_root)
        # claims' region folders apart from the device plugin's per-container ones
        self.paths = HostPaths(libvgpu=opts.libvgpu, preload_file=str(root / "ld.so.preload"),
                               region_root=str(root / CLAIMS_DIR), node_dir=str(root / "node"))
        self.checkpoint = Checkpoint(opts.state_dir / "checkpoint.json")
        self.gpus: tuple[PhysicalGpu, ...] = ()
        self.generation = 0
        self.lock = threading.Lock()  # prepare / unprepare / the checkpoint
        self.slice_lock = threading.Lock()
        self.registered = threading.Event()
        self.registrations = 0
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.servers: list[grpc.Server] = []
        self._threads: list[threading.Thread] = []

    # ---- the ResourceSlice ----------------------------------------------------------------------

    def refresh(self) -> bool:
        gpus = self.inventory.read()
        if gpus == self.gpus:
            return False
        for g in gpus:
            old = next((o for o in self.gpus if o.uuid == g.uuid), None)
            if old is not None and old.healthy != g.healthy:
                self.log(f"GPU {g.uuid} is now {'healthy' if g.healthy else 'unhealthy'}"
                         f"{': ' + g.why_unhealthy if g.why_unhealthy else ''}")
        self.gpus = gpus
        return True

    def publish(self) -> bool:
        """Make the API's slice of this node what it should be; True when it wrote."""
        with self.slice_lock:
            want = resource_slice(self.opts.node, self.gpus, self.settings, self.generation,
                                  self.opts.driver)
            name = want["metadata"]["name"]
            have = self.resources.get_slice(name)
            if have is not None and have["spec"].get("nodeName") == self.opts.node and \
                    same_devices(have["spec"].get("devices"), want["spec"]["devices"]):
                return False
            if have is not None:
                self.generation = int(have["spec"]["pool"].get("generation", 0)) + 1
                want["spec"]["pool"]["generation"] = self.generation
            self.resources.put_slice(want, None if have is None
                                     else have["metadata"]["resourceVersion"])
            self.log(f"published ResourceSlice {name}: {len(self.gpus)} GPU(s), pool generation "
                     f"{self.generation}")
            return True

    # ---- Registration (plugins_registry) ------------------------------------------------------

    def GetInfo(self, request: Any, context: Any) -> Any:
        return registration().pb.PluginInfo(type="DRAPlugin", name=self.opts.driver,
                                            endpoint=str(self.opts.plugin_socket),
                                            supported_versions=[SERVICE])

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        if request.plugin_registered:
            self.registrations += 1
            self.log(f"registered with the kubelet as DRA driver {self.opts.driver}")
            self.registered.set()
            self.wake.set()  # publish the slice now
        else:
            self.log(f"the kubelet refused the registration: {request.error}")
        return registration().pb.RegistrationStatusResponse()

    # ---- DRAPlugin v1 ---------------------------------------------------------------------------

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        pb = dra().pb
        out = pb.NodePrepareResourcesResponse()
        for c in request.claims:
            resp = out.claims[c.uid]
            try:
                prepared = self.prepare(c.namespace, c.name, c.uid)
            except ClaimError as err:
                self.log(f"NodePrepareResources refused: {err}")
                resp.error = str(err)
                continue
            for d in prepared.devices:
                resp.devices.add(request_names=[d.request], pool_name=d.pool,
                                 device_name=d.device, cdi_device_ids=[d.cdi_id])
        return out

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        pb = dra().pb
        out = pb.NodeUnprepareResourcesResponse()
        for c in request.claims:
            resp = out.claims[c.uid]
            try:
                self.unprepare(c.uid)
            except Exception as err:
                self.log(f"NodeUnprepareResources of claim {c.namespace}/{c.name}: {err}")
                resp.error = f"claim {c.namespace}/{c.name}: {err}"
        return out

    # ---- prepare and unprepare, without gRPC --------------------------------------------------

    def prepare(self, namespace: str, name: str, uid: str) -> PreparedClaim:
        """Set up a claim (region folders, CDI spec, checkpoint) or return what was set up
        before; ClaimError naming the claim otherwise, with nothing left behind."""
        with self.lock:
            done = self.checkpoint.claims.get(uid)
            if done is not None and Path(done.cdi_file).exists() and \
                    all(Path(d).is_dir() for d in done.region_dirs):
                return done
            # not prepared, or its files are gone (the CDI folder is often a tmpfs that a
            # reboot empties): set it up (again) from the claim
            try:
                claim = self.resources.get_claim(namespace, name)
            except Exception as err:
                raise ClaimError(f"claim {namespace}/{name}: cannot read it from the API "
                                 f"server: {err}") from None
            if claim is None:
                raise ClaimError(f"claim {namespace}/{name} does not exist")
            if (claim.get("metadata") or {}).get("uid") != uid:
                raise ClaimError(f"claim {namespace}/{name} has uid "
                                 f"{(claim.get('metadata') or {}).get('uid')}, not {uid} (it "
                                 "was deleted and made again)")
            plan = plan_claim(claim, self.opts.node, self.gpus, self.settings, self.paths,
                              self.opts.driver)
            prepared = self._apply(plan)
        self.log(f"prepared {plan.ref}: " + "; ".join(
            f"{u.request}: " + ", ".join(f"{g.uuid} {lim.describe()} {g.cores}%"
                                         for g, lim in zip(u.grants, u.limits, strict=True))
            for u in plan.units))
        return prepared

    def _cdi_file(self, uid: str) -> Path:
        return self.opts.cdi_dir / f"{self.opts.driver}-claim_{uid}.json"

    def _apply(self, plan: ClaimPlan) -> PreparedClaim:
        made: list[Path] = []
        cdi = self._cdi_file(plan.uid)
        try:
            for u in plan.units:
                cores = [0 if self.settings.disable_core_limit else g.cores for g in u.grants]
                made += write_region(Path(u.region_dir),
                                     [(g.uuid, lim) for g, lim in
                                      zip(u.grants, u.limits, strict=True)], cores)
                (Path(u.region_dir) / CLAIM_RECORD).write_text(
                    encode_claim_record(claim_record(plan, u)))
            self.opts.cdi_dir.mkdir(parents=True, exist_ok=True)
            tmp = cdi.with_suffix(".tmp")
            tmp.write_text(cdi_text(plan))
            os.replace(tmp, cdi)
            prepared = PreparedClaim(
                uid=plan.uid, namespace=plan.namespace, name=plan.name,
                devices=tuple(PreparedDevice(s.request, s.pool, s.device, u.cdi_id)
                              for u in plan.units for s in u.shares),
                region_dirs=tuple(u.region_dir for u in plan.units), cdi_file=str(cdi))
            self.checkpoint.put(prepared)
            return prepared
        except Exception as err:
            for p in made:
                shutil.rmtree(p, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                cdi.unlink()
            raise ClaimError(f"{plan.ref}: cannot set it up on node {self.opts.node}: {err}; "
                             "nothing was applied") from None

    def unprepare(self, uid: str) -> bool:
        """Remove what prepare set up for the claim; False when nothing was prepared."""
        with self.lock:
            done = self.checkpoint.claims.get(uid)
            if done is None:
                return False
            with contextlib.suppress(FileNotFoundError):
                Path(done.cdi_file).unlink()
            for d in done.region_dirs:
                shutil.rmtree(d, ignore_errors=True)
            self.checkpoint.drop(uid)
        self.log(f"unprepared claim {done.namespace}/{done.name}")
        return True

    # ---- serving -----------------------------------------------------------------------------

    def _prepare_host(self) -> None:
        for d in (Path(self.paths.region_root), Path(self.paths.node_dir)):
            d.mkdir(parents=True, exist_ok=True)
        os.chmod(self.paths.node_dir, 0o777)
        preload = Path(self.paths.preload_file)
        if not preload.exists() or preload.read_text() != preload_text():
            tmp = preload.with_name(".ld.so.preload.dra.tmp")
            tmp.write_text(preload_text())
            os.chmod(tmp, 0o644)
            os.replace(tmp, preload)

    def _serve(self, socket: Path, add: Callable[[grpc.Server], None]) -> grpc.Server:
        socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            socket.unlink()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                             options=[("grpc.so_reuseport", 0)])
        add(server)
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        self.servers.append(server)
        return server

    def serve(self) -> None:
        """Serve DRAPlugin first, then the registration socket (the kubelet calls GetInfo as
        soon as that appears)."""
        self._serve(self.opts.plugin_socket,
                    lambda s: dra().grpc.add_DRAPluginServicer_to_server(self, s))
        self._serve_registration()

    def _serve_registration(self) -> None:
        self._serve(self.opts.registry_socket,
                    lambda s: registration().grpc.add_RegistrationServicer_to_server(self, s))

    def start(self) -> DraDriver:
        self.checkpoint.load()
        self._prepare_host()
        self.refresh()
        self.serve()
        t = threading.Thread(target=self._loop, name="draplugin-loop", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def _loop(self) -> None:
        """Republish the slice after each registration and whenever the GPUs change or the
        slice is gone (the kubelet deletes its node's slices when it starts); serve the
        registration socket again if it was removed."""
        while not self.stopping.is_set():
            self.wake.wait(min(self.opts.health_seconds, self.opts.resync_seconds))
            self.wake.clear()
            if self.stopping.is_set():
                break
            if not self.opts.registry_socket.exists():
                self.log(f"{self.opts.registry_socket} was removed; serving it again")
                with contextlib.suppress(Exception):
                    self._serve_registration()
            try:
                self.refresh()
            except Exception as err:
                self.log(f"cannot read the GPUs: {err}")
            if self.registered.is_set():
                try:
                    self.publish()
                except Exception as err:
                    self.log(f"cannot publish the ResourceSlice of node {self.opts.node}: {err}")

    def stop(self) -> None:
        """Stop serving and remove our sockets; prepared claims stay (the checkpoint, regions
        and CDI specs keep running pods working across a restart). The slice stays too: the
        kubelet deletes it when the driver stays unregistered."""
        self.stopping.set()
        self.wake.set()
        for t in self._threads:  # no loop left running into the interpreter's shutdown
            t.join(timeout=10.0)
        for s in self.servers:
            s.stop(grace=1.0).wait()
        for sock in (self.opts.registry_socket, self.opts.plugin_socket):
            with contextlib.suppress(FileNotFoundError):
                sock.unlink()
