"""`gpuwarden deviceplugin`: run the kubelet device plugin on this node.

Settings come from `--config FILE` (HAMi's keys; a ConfigMap in a cluster), then the flags.
Heavy imports (grpc, pynvml, kubernetes) happen inside the handler only.
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

# flag -> Settings field (the same validation as the file's keys)
_SETTING_FLAGS = {
    "device_split_count": "device split count (1..1024; file key deviceSplitCount)",
    "device_memory_scaling": "memory advertised per GPU as a multiple of the real one "
                             "(deviceMemoryScaling)",
    "mig_strategy": "only none (migStrategy)",
    "default_mem_mib": "MiB per GPU for a container that gives none; 0 = whole GPU (defaultMem)",
    "default_cores": "percent of a GPU for a container that gives none (defaultCores)",
    "gpu_scheduler_policy": "binpack or spread: the preferred allocation (gpuSchedulerPolicy)",
    "region_root": "host folder of the per-container region folders (regionRoot)",
    "gpu": "the resource to advertise (resourceName)",
}


def register(sub: Any) -> None:
    p = sub.add_parser("deviceplugin", help="run the kubelet device plugin on this node",
                       description="Advertise each GPU as deviceSplitCount slices to the "
                       "kubelet and set up every container that gets slices (limits, region, "
                       "libvgpu preloaded). Exit status 2 on bad settings.")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (YAML with HAMi's keys; see docs/deviceplugin.md)")
    p.add_argument("--node", default=os.environ.get("NODE_NAME") or socket.gethostname(),
                   help="this node's name (default: $NODE_NAME, else the host name)")
    p.add_argument("--plugin-dir", type=Path, default=Path("/var/lib/kubelet/device-plugins"),
                   help="the kubelet's device-plugins folder (our socket goes there)")
    p.add_argument("--kubelet-socket", type=Path, default=None, metavar="PATH",
                   help="the kubelet's registration socket (default: PLUGIN_DIR/kubelet.sock)")
    p.add_argument("--socket-name", default="gpuwarden.sock",
                   help="file name of our socket in PLUGIN_DIR")
    p.add_argument("--pod-resources-socket", type=Path,
                   default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"), metavar="PATH",
                   help="the kubelet's PodResources API, to verify each container's devices")
    p.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="talk to the API server with this kubeconfig (default: in-cluster)")
    p.add_argument("--libvgpu", default=None, metavar="PATH",
                   help="host path of libvgpu.so mounted into containers (default: the build "
                   "beside this gpuwarden)")
    p.add_argument("--driver-mount", action="append", default=None, metavar="PATH",
                   help="host path mounted read-only into every GPU container (repeatable; "
                   "file key driverMounts)")
    p.add_argument("--health-seconds", type=float, default=5.0,
                   help="how often GPU health is read when NVML gives no events")
    for name, text in _SETTING_FLAGS.items():
        p.add_argument(f"--{name.replace('_', '-')}", dest=f"set_{name}", default=None,
                       metavar="VALUE", help=text)
    p.set_defaults(handler=cmd_deviceplugin)


def cmd_deviceplugin(args: argparse.Namespace) -> int:
    from gpuwarden.config import SettingsError, load_settings

    overrides: dict[str, Any] = {k: getattr(args, f"set_{k}") for k in _SETTING_FLAGS}
    if args.driver_mount:
        overrides["driver_mounts"] = args.driver_mount
    try:
        settings = load_settings(args.config, overrides)
    except SettingsError as err:
        print(f"gpuwarden deviceplugin: {err}", file=sys.stderr)
        return 2
    libvgpu = args.libvgpu
    if libvgpu is None:
        from libvgpu.paths import NotBuiltError, shim_path

        try:
            libvgpu = str(shim_path())
        except NotBuiltError as err:
            print(f"gpuwarden deviceplugin: {err} (or pass --libvgpu)", file=sys.stderr)
            return 2

    from deviceplugin.kube import KubeCluster
    from deviceplugin.nvml import NvmlInventory
    from deviceplugin.server import DevicePlugin, PluginOptions, PodResourcesClient

    opts = PluginOptions(node=args.node, plugin_dir=args.plugin_dir,
                         kubelet_socket=args.kubelet_socket, socket_name=args.socket_name,
                         pod_resources_socket=args.pod_resources_socket, libvgpu=libvgpu,
                         health_seconds=args.health_seconds)
    try:
        inventory = NvmlInventory().open()
    except Exception as err:
        print(f"gpuwarden deviceplugin: cannot read the GPUs through NVML: {err}",
              file=sys.stderr)
        return 2
    try:
        cluster = KubeCluster(settings.resource_names, args.kubeconfig)
    except Exception as err:
        print(f"gpuwarden deviceplugin: cannot reach the Kubernetes API "
              f"({'--kubeconfig ' + args.kubeconfig if args.kubeconfig else 'in-cluster'}): "
              f"{err}", file=sys.stderr)
        return 2
    podres = (PodResourcesClient(opts.pod_resources_socket, settings.resource_names.gpu)
              if opts.pod_resources_socket else None)
    plugin = DevicePlugin(settings, opts, inventory, cluster, podres)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    plugin.start()
    plugin.log(f"serving {plugin.socket_path} for node {args.node}")
    done.wait()
    plugin.stop()
    plugin.log("stopped")
    return 0



