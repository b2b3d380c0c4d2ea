"""The command-line pieces the node-side plugins share (`gpuwarden deviceplugin` and
`gpuwarden draplugin`): the settings file and its flags, the node, the API credentials, libvgpu,
driver mounts and the health period; and turning them into `Settings` and libvgpu's host path.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuwarden.config import Settings

__all__ = ["add_node_flags", "node_settings"]


def add_node_flags(p: argparse.ArgumentParser, *, settings: Mapping[str, str], docs: str,
                   driver_mount_help: str, health_help: str) -> None:
    """Add the shared flags; `settings` maps a Settings field to its flag's help."""
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help=f"settings file (YAML with HAMi's keys; see {docs})")
    p.add_argument("--node", default=os.environ.get("NODE_NAME") or socket.gethostname(),
                   help="this node's name (default: $NODE_NAME, else the host name)")
    p.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="talk to the API server with this kubeconfig (default: in-cluster)")
    p.add_argument("--libvgpu", default=None, metavar="PATH",
                   help="host path of libvgpu.so mounted into containers (default: the build "
                   "beside this gpuwarden)")
    p.add_argument("--driver-mount", action="append", default=None, metavar="PATH",
                   help=driver_mount_help)
    p.add_argument("--health-seconds", type=float, default=5.0, help=health_help)
    for name, text in settings.items():
        p.add_argument(f"--{name.replace('_', '-')}", dest=f"set_{name}", default=None,
                       metavar="VALUE", help=text)
    p.set_defaults(setting_flags=tuple(settings))


def node_settings(args: argparse.Namespace, prog: str) -> tuple[Settings, str] | None:
    """The settings (file, then flags) and libvgpu's host path; None after printing why not
    (the caller exits 2)."""
    from gpuwarden.config import SettingsError, load_settings

    overrides: dict[str, Any] = {k: getattr(args, f"set_{k}") for k in args.setting_flags}
    if args.driver_mount:
        overrides["driver_mounts"] = args.driver_mount
    try:
        settings = load_settings(args.config, overrides)
    except SettingsError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return None
    libvgpu = args.libvgpu
    if libvgpu is None:
        from libvgpu.paths import NotBuiltError, shim_path

        try:
            libvgpu = str(shim_path())
        except NotBuiltError as err:
            print(f"{prog}: {err} (or pass --libvgpu)", file=sys.stderr)
            return None
    return settings, libvgpu
