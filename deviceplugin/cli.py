"""`gpuwarden deviceplugin`: run the kubelet device plugin on this node.

Settings come from `--config FILE` (HAMi's keys; a ConfigMap in a cluster), then the flags.
Heavy imports (grpc, pynvml, kubernetes) happen inside the handler only.
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
    add_node_flags(p, settings=_SETTING_FLAGS, docs="docs/deviceplugin.md",
                   driver_mount_help="host path mounted read-only into every GPU container "
                   "(repeatable; file key driverMounts)",
                   health_help="how often GPU health is read when NVML gives no events")
    p.add_argument("--plugin-dir", type=Path, default=Path("/var/lib/kubelet/device-plugins"),
                   help="the kubelet's device-plugins folder (our socket goes there)")
    p.add_argument("--kubelet-socket", type=Path, default=None, metavar="PATH",
                   help="the kubelet's registration socket (default: PLUGIN_DIR/kubelet.sock)")
    p.add_argument("--socket-name", default="gpuwarden.sock",
                   help="file name of our socket in PLUGIN_DIR")
    p.add_argument("--pod-resources-socket", type=Path,
                   default=Path("/var/lib/kubelet/pod-resources/kubelet.sock"), metavar="PATH",
                   help="the kubelet's PodResources API, to verify each container's devices")
    p.set_defaults(handler=cmd_deviceplugin)


def cmd_deviceplugin(args: argparse.Namespace) -> int:
    found = node_settings(args, "gpuwarden deviceplugin")
    if found is None:
        return 2
    settings, libvgpu = found

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
        print(f"gpuwarden deviceplugin: cannot reach the Kubernetes API: {err}", file=sys.stderr)
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
    cluster.close()
    plugin.log("stopped")
    return 0



