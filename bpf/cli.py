"""`gpuwarden bpf ...`: run the eBPF audit by hand.

  gpuwarden bpf check [--lib PATH]   what stops the audit from running here (exit 2 if any)
  gpuwarden bpf trace [--json] [--duration S] [--interval S] [--lib PATH] [--no-launch-counters]
                                     a live per-process table of device memory (what libcuda
                                     was asked for since the probes attached, from the in-kernel
                                     ledger, beside what NVML says the process holds) and
                                     launches; with --json one object per interval and a final one

BCC is imported only inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from gpuwarden.argtypes import seconds

__all__ = ["register"]


_seconds = seconds()


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
    trace.add_argument("--duration", type=_seconds, default=None, metavar="SECONDS",
                       help="stop SECONDS after the start, the probes' compilation (a few "
                       "seconds) included")
    trace.add_argument("--interval", type=_seconds, default=1.0, metavar="SECONDS",
                       help="seconds between reports (default 1)")
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


NvmlView = Mapping[int, Mapping[str, int]]  # pid -> GPU UUID -> bytes


def _nvml() -> tuple[Callable[[], NvmlView] | None, str]:
    """A reader of NVML's per-process memory (the driver's view, context included, and memory
    held from before the probes attached), or None and why not."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        uuids = [str(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
    except Exception as err:  # no driver, no GPU, no pynvml
        return None, f"off: {err}"

    def read() -> NvmlView:
        out: dict[int, dict[str, int]] = {}
        for h, uuid in zip(handles, uuids, strict=True):
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                per = out.setdefault(int(p.pid), {})
                per[uuid] = per.get(uuid, 0) + int(p.usedGpuMemory or 0)
        return out

    return read, "on"


def process_rows(ledger: Mapping[int, Mapping[int, int]], launches: Mapping[int, int],
                 nvml: NvmlView | None, comm: Callable[[int], str]) -> list[dict[str, Any]]:
    """One entry per process: its name, launches, and per device what eBPF counted since it
    attached (by the process's own CUDA ordinal; null when the probe did not see the context
    made) and what NVML says it holds (by GPU UUID). A process on one GPU by NVML gets one
    device entry with both; otherwise eBPF's and NVML's entries are listed apart."""
    rows = []
    for pid in sorted(set(ledger) | set(launches) | set(nvml or {})):
        ebpf = dict(ledger.get(pid, {}))
        held = dict((nvml or {}).get(pid, {}))
        devices: list[dict[str, Any]] = []
        if len(held) == 1 and len(ebpf) <= 1:
            ((uuid, nbytes),) = held.items()
            ordinal, counted = next(iter(ebpf.items()), (-1, 0))
            devices.append({"device": ordinal if ordinal >= 0 else None, "gpu_uuid": uuid,
                            "ebpf_bytes": counted, "nvml_bytes": nbytes})
        else:
            devices += [{"device": o if o >= 0 else None, "gpu_uuid": None, "ebpf_bytes": b,
                         "nvml_bytes": None} for o, b in sorted(ebpf.items())]
            devices += [{"device": None, "gpu_uuid": u, "ebpf_bytes": None, "nvml_bytes": b}
                        for u, b in sorted(held.items())]
        rows.append({"pid": pid, "comm": comm(pid), "launches": launches.get(pid, 0),
                     "devices": devices})
    return rows


def _report(probe: Any, final: bool, elapsed: float, events: list[Any],
            nvml: Callable[[], NvmlView] | None, nvml_state: str) -> dict[str, Any]:
    held = None
    if nvml is not None:
        try:
            held = nvml()
        except Exception as err:  # the GPU fell off the bus, the driver went away
            nvml_state = f"off: {err}"
    return {
        "type": "final" if final else "interval",
        "elapsed_s": round(elapsed, 3),
        "processes": process_rows(probe.snapshot(), probe.launch_counts(), held, _comm),
        "nvml": nvml_state,
        "events": len(events),
        "killed": [
            {"pid": e.pid, "comm": _comm(e.pid), "bytes": e.bytes, "device": e.device}
            for e in events if e.killed
        ],
        "lost": probe.lost_events(),
        "errors": {k: v for k, v in probe.errors().items() if v and k != "lost_event"},
    }


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "-"


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / (1 << 20):.1f}"


def _print_table(report: dict[str, Any], out: TextIO) -> None:
    title = "final" if report["type"] == "final" else f"t={report['elapsed_s']:.1f}s"
    print(f"-- {title}  lost events: {report['lost']}  nvml: {report['nvml']}", file=out)
    print(f"{'PID':>8} {'COMM':<15} {'DEV':>3} {'GPU':<12} {'EBPF_MIB':>10} {'NVML_MIB':>10} "
          f"{'LAUNCHES':>9}", file=out)
    for p in report["processes"]:
        for d in p["devices"] or [{"device": None, "gpu_uuid": None, "ebpf_bytes": None,
                                   "nvml_bytes": None}]:
            dev = "?" if d["device"] is None else str(d["device"])
            gpu = (d["gpu_uuid"] or "-")[:12]
            print(f"{p['pid']:>8} {p['comm'][:15]:<15} {dev:>3} {gpu:<12} "
                  f"{_mib(d['ebpf_bytes']):>10} {_mib(d['nvml_bytes']):>10} "
                  f"{p['launches']:>9}", file=out)
    for k in report["killed"]:
        print(f"killed pid {k['pid']} ({k['comm']}) allocating {k['bytes']} bytes on device "
              f"{k['device']}", file=out)
    out.flush()


def _trace(args: argparse.Namespace) -> int:
    start = time.monotonic()
    end = start + args.duration if args.duration else float("inf")
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
    print("gpuwarden bpf trace: compiling and attaching the probes (a few seconds)...",
          file=sys.stderr, flush=True)
    nvml, nvml_state = _nvml()
    probe = AuditProbe(libs=args.lib, launch_counters=not args.no_launch_counters)
    with probe:
        libs = probe.attached()
        names = ", ".join(f"{a.path} ({a.probes} probes)" for a in libs) or "none yet"
        print(f"gpuwarden bpf trace: attached to {names} after "
              f"{time.monotonic() - start:.1f} s; memory held from before shows in NVML's "
              f"column (nvml {nvml_state})", file=sys.stderr, flush=True)
        while True:
            deadline = min(time.monotonic() + args.interval, end)
            events = []
            while not stop and time.monotonic() < deadline:
                wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
                events += probe.poll_events(timeout_ms=min(wait_ms, 200))
            if args.lib is None and not stop and time.monotonic() < end:
                for new in probe.rescan():
                    print(f"gpuwarden bpf trace: attached to {new.path}", file=sys.stderr)
            final = stop or time.monotonic() >= end
            report = _report(probe, final, time.monotonic() - start, events, nvml, nvml_state)
            if args.json:
                print(json.dumps(report), flush=True)
            else:
                _print_table(report, sys.stdout)
            if final:
                break
        probe.close(exiting=True)  # the uprobes' slow teardown happens after we have exited
    return 0
