"""The `gpuwarden` command. Each component owns its subcommands in its own `cli` module, which
exposes `register(subparsers)`; this module only assembles them.

Exit codes follow one convention across subcommands: 0 success, 1 the checked thing is bad
(policy errors, a violation), 2 usage or environment errors.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import sys
from collections.abc import Sequence

from gpuwarden import __version__

# Component CLI modules, in the order their subcommands appear in --help.
COMPONENT_CLIS: tuple[str, ...] = (
    "agent.cli",
    "policy.cli",
    "bpf.cli",
    "libvgpu.cli",
    "deviceplugin.cli",
    "draplugin.cli",
    "extender.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuwarden",
        description="Share NVIDIA GPUs safely: per-workload memory and compute slices, "
        "enforced in-process by libvgpu and audited by eBPF and NVML.",
    )
    parser.add_argument("--version", action="version", version=f"gpuwarden {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMPONENT_CLIS:
        importlib.import_module(name).register(sub)
    return parser


def dump_tracebacks_on_crash() -> None:
    """A fatal signal (SIGSEGV, SIGABRT, ...) raised inside a C extension (grpc, NVML, the BPF
    loader) writes every thread's Python traceback to stderr, the daemon's log, instead of
    leaving only an exit status (a DRA driver once exited -6 after its last log line)."""
    if faulthandler.is_enabled():
        return
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no stderr with an fd
        faulthandler.enable()


def main(argv: Sequence[str] | None = None) -> int:
    dump_tracebacks_on_crash()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
