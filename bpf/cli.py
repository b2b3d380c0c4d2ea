"""`gpuwarden bpf ...`: run the eBPF audit by hand.

  gpuwarden bpf check [--lib PATH]   what stops the audit from running here (exit 2 if any)
  gpuwarden bpf trace [--json] [--duration S] [--interval S] [--lib PATH] [--no-launch-counters]
                                     a live per-process table of device memory (from the
                                     in-kernel ledger) and launches; with --json one object per
                                     interval and a final one

BCC is imported only inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["register"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0 (e.g. 1 or 0.5)")
    return value


def register(subparsers: Any) -> None:
    bpf = subparsers.add_parser("bpf", help="the eBPF audit of libcuda (root, BCC)")
    sub = bpf.add_subparsers(dest="bpf_command", metavar="SUBCOMMAND")

    def _usage(_args: argparse.Namespace) -> int:
        bpf.print_help(sys.stderr)
        return 2

    bpf.set_defaults(handler=_usage)

    lib_help = "libcuda file to attach to (repeatable; default: found through the loader and /proc)"
    check = sub.add_parser("check", help="say what stops the audit from running here")
    check.add_argument("--lib", action="append", type=Path, default=None, help=lib_help)
    check.set_defaults(handler=_check)

    trace = sub.add_parser("trace", help="live per-process device memory and launches")
    trace.add_argument("--json", action="store_true", help="one JSON object per interval")
    trace.add_argument("--duration", type=_seconds, default=None, help="stop after SECONDS")
    trace.add_argument("--interval", type=_seconds, default=1.0, help="seconds between reports")
    trace.add_argument("--lib", action="append", type=Path, default=None, help=lib_help)
    trace.add_argument(
        "--no-launch-counters", action="store_true", help="do not probe the launch entry points"
    )
    trace.set_defaults(handler=_trace)


def _problems(libs: list[Path] | None) -> list[str]:
    from bpf.environment import check_environment

    return check_environment(libs)


def _check(args: argparse.Namespace) -> int:
    problems = _problems(args.lib)
    for p in problems:
        print(f"gpuwarden bpf: {p}", file=sys.stderr)
    if not problems:
        print("eBPF audit can run here")
    return 2 if problems else 0


def _report(probe: Any, final: bool, elapsed: float, events: list[Any]) -> dict[str, Any]:
    return {
        "type": "final" if final else "interval",
        "elapsed_s": round(elapsed, 3),
        "ledger": {
            str(pid): {str(dev): b for dev, b in sorted(devs.items())}
            for pid, devs in sorted(probe.snapshot().items())
        },
        "launches": {str(pid): n for pid, n in sorted(probe.launch_counts().items())},
        "events": len(events),
        "killed": [
            {"pid": e.pid, "bytes": e.bytes, "device": e.device} for e in events if e.killed
        ],
        "lost": probe.lost_events(),
        "errors": {k: v for k, v in probe.errors().items() if v and k != "lost_event"},
    }


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "-"


def _print_table(report: dict[str, Any], out: TextIO) -> None:
    title = "final" if report["type"] == "final" else f"t={report['elapsed_s']:.1f}s"
    print(f"-- {title}  lost events: {report['lost']}", file=out)
    print(f"{'PID':>8} {'COMM':<16} {'DEVICE':>6} {'BYTES':>16} {'LAUNCHES':>10}", file=out)
    pids = sorted({int(p) for p in report["ledger"]} | {int(p) for p in report["launches"]})
    for pid in pids:
        devs = report["ledger"].get(str(pid)) or {"-": 0}
        launches = report["launches"].get(str(pid), 0)
        for dev, nbytes in devs.items():
            device = "?" if dev == "-1" else dev
            row = f"{pid:>8} {_comm(pid):<16} {device:>6} {nbytes:>16} {launches:>10}"
            print(row, file=out)
    for k in report["killed"]:
        print(
            f"killed pid {k['pid']} allocating {k['bytes']} bytes on device {k['device']}", file=out
        )
    out.flush()


def _trace(args: argparse.Namespace) -> int:
    problems = _problems(args.lib)
    if problems:
        for p in problems:
            print(f"gpuwarden bpf trace: {p}", file=sys.stderr)
        return 2
    from bpf.audit import AuditProbe

    stop = False

    def _stop(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    probe = AuditProbe(libs=args.lib, launch_counters=not args.no_launch_counters)
    with probe:
        libs = probe.attached()
        names = ", ".join(f"{a.path} ({a.probes} probes)" for a in libs) or "none yet"
        print(f"gpuwarden bpf trace: attached to {names}", file=sys.stderr, flush=True)
        start = time.monotonic()
        end = start + args.duration if args.duration else float("inf")
        while not stop:
            deadline = min(time.monotonic() + args.interval, end)
            events = []
            while not stop and time.monotonic() < deadline:
                wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
                events += probe.poll_events(timeout_ms=min(wait_ms, 200))
            if args.lib is None:
                for new in probe.rescan():
                    print(f"gpuwarden bpf trace: attached to {new.path}", file=sys.stderr)
            final = stop or time.monotonic() >= end
            report = _report(probe, final, time.monotonic() - start, events)
            if args.json:
                print(json.dumps(report), flush=True)
            else:
                _print_table(report, sys.stdout)
            if final:
                break
    return 0
