"""`gpuwarden draplugin`: run the DRA driver's kubelet plugin on this node.

Settings come from `--config FILE` (the device plugin's file and keys), then the flags. Heavy
imports (grpc, pynvml, kubernetes) happen inside the handler only.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from deviceplugin.nodecli import add_node_flags, node_settings

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
    add_node_flags(p, settings=_SETTING_FLAGS, docs="docs/dra.md",
                   driver_mount_help="host path mounted read-only into every claim's "
                   "containers (repeatable; :rw for writable; file key driverMounts)",
                   health_help="how often GPU health and the ResourceSlice are checked")
    p.add_argument("--kubelet-root", type=Path, default=Path("/var/lib/kubelet"),
                   help="the kubelet's --root-dir (plugins_registry/ and plugins/ are in it)")
    p.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"),
                   help="where the container runtime reads CDI specs (containerd: "
                   "cdi_spec_dirs)")
    p.add_argument("--state-dir", type=Path, default=Path("/var/lib/gpuwarden/dra"),
                   help="where the checkpoint of prepared claims is kept")
    p.set_defaults(handler=cmd_draplugin)


def cmd_draplugin(args: argparse.Namespace) -> int:
    found = node_settings(args, "gpuwarden draplugin")
    if found is None:
        return 2
    settings, libvgpu = found

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
        print(f"gpuwarden draplugin: cannot reach the Kubernetes API: {err}", file=sys.stderr)
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
