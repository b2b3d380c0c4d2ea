"""`gpuwarden draplugin`: run the DRA driver's kubelet plugin on this node.

Settings come from `--config FILE` (the device plugin's file and keys), then the flags. Heavy
imports (grpc, pynvml, kubernetes) happen inside the handler only.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["register"]

_SETTING_FLAGS = {
    "device_memory_scaling": "memory advertised per GPU as a multiple of the real one "
                             "(deviceMemoryScaling)",
    "default_mem_mib": "MiB of a claim that asks for no memory; 0 = whole GPU (defaultMem)",
    "default_cores": "percent of a GPU for a claim that asks for no cores (defaultCores)",
    "region_root": "host folder of the region folders; claims' go in its claims/ "
                   "(regionRoot)",
}


def register(sub: Any) -> None:
    p = sub.add_parser("draplugin", help="run the DRA driver (kubelet plugin) on this node",
                       description="Publish this node's GPUs as a ResourceSlice whose devices "
                       "many claims share (consumable memory and cores capacity), and prepare "
                       "each claim the kubelet hands over: its region with the consumed memory "
                       "and cores, a CDI spec that brings libvgpu, the limits and the region "
                       "into the container. Exit status 2 on bad settings.")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (YAML with HAMi's keys; see docs/dra.md)")
    p.add_argument("--node", default=os.environ.get("NODE_NAME") or socket.gethostname(),
                   help="this node's name (default: $NODE_NAME, else the host name)")
    p.add_argument("--kubelet-root", type=Path, default=Path("/var/lib/kubelet"),
                   help="the kubelet's --root-dir (plugins_registry/ and plugins/ are in it)")
    p.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"),
                   help="where the container runtime reads CDI specs (containerd: "
                   "cdi_spec_dirs)")
    p.add_argument("--state-dir", type=Path, default=Path("/var/lib/gpuwarden/dra"),
                   help="where the checkpoint of prepared claims is kept")
    p.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="talk to the API server with this kubeconfig (default: in-cluster)")
    p.add_argument("--libvgpu", default=None, metavar="PATH",
                   help="host path of libvgpu.so mounted into containers (default: the build "
                   "beside this gpuwarden)")
    p.add_argument("--driver-mount", action="append", default=None, metavar="PATH",
                   help="host path mounted read-only into every claim's containers "
                   "(repeatable; :rw for writable; file key driverMounts)")
    p.add_argument("--health-seconds", type=float, default=5.0,
                   help="how often GPU health and the ResourceSlice are checked")
    for name, text in _SETTING_FLAGS.items():
        p.add_argument(f"--{name.replace('_', '-')}", dest=f"set_{name}", default=None,
                       metavar="VALUE", help=text)
    p.set_defaults(handler=cmd_draplugin)


def cmd_draplugin(args: argparse.Namespace) -> int:
    from gpuwarden.config import SettingsError, load_settings

    overrides: dict[str, Any] = {k: getattr(args, f"set_{k}") for k in _SETTING_FLAGS}
    if args.driver_mount:
        overrides["driver_mounts"] = args.driver_mount
    try:
        settings = load_settings(args.config, overrides)
    except SettingsError as err:
        print(f"gpuwarden draplugin: {err}", file=sys.stderr)
        return 2
    libvgpu = args.libvgpu
    if libvgpu is None:
        from libvgpu.paths import NotBuiltError, shim_path

        try:
            libvgpu = str(shim_path())
        except NotBuiltError as err:
            print(f"gpuwarden draplugin: {err} (or pass --libvgpu)", file=sys.stderr)
            return 2

    from deviceplugin.nvml import NvmlInventory
    from draplugin.kube import KubeResources
    from draplugin.server import DraDriver, DraOptions

    opts = DraOptions(node=args.node, kubelet_root=args.kubelet_root, cdi_dir=args.cdi_dir,
                      state_dir=args.state_dir, libvgpu=libvgpu,
                      health_seconds=args.health_seconds,
                      resync_seconds=args.health_seconds)
    try:
        inventory = NvmlInventory().open()
    except Exception as err:
        print(f"gpuwarden draplugin: cannot read the GPUs through NVML: {err}", file=sys.stderr)
        return 2
    try:
        resources = KubeResources(args.kubeconfig)
    except Exception as err:
        print(f"gpuwarden draplugin: cannot reach the Kubernetes API "
              f"({'--kubeconfig ' + args.kubeconfig if args.kubeconfig else 'in-cluster'}): "
              f"{err}", file=sys.stderr)
        return 2
    driver = DraDriver(settings, opts, inventory, resources)
    try:
        driver.start()
    except ValueError as err:  # a checkpoint that is not ours
        print(f"gpuwarden draplugin: {err}", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    driver.log(f"serving {opts.plugin_socket} (registration {opts.registry_socket}) for node "
               f"{args.node}")
    done.wait()
    driver.stop()
    driver.log("stopped")
    return 0
