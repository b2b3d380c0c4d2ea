"""`gpuwarden top`: a live table per workload and GPU, from the agent's control socket."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from agent.control import request
from agent.ledger import default_state_dir

__all__ = ["render", "top"]


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / (1 << 20):.0f}"


def render(status: dict[str, Any]) -> str:
    h = status.get("health", {})
    lines = [f"gpuwarden top   policy {str(h.get('policy_digest', ''))[:12]}   "
             f"ebpf {h.get('ebpf')}   nvml {h.get('nvml')}   workloads {h.get('workloads')}",
             ""]
    head = (f"{'WORKLOAD':<28} {'GPU':<14} {'MEM MiB shim/ebpf/nvml':<24} {'LIMIT':>7} "
            f"{'CORES':>6} {'LIMIT':>6} {'AGREE':<5} {'LAST ACTION':<14} RULE")
    lines.append(head)
    for r in status.get("rows", []):
        u = r.get("used", {})
        mem = "/".join(_mib(u.get(k)) for k in ("shim", "ebpf", "nvml"))
        cores = "-" if r.get("sm_ratio") is None else f"{100 * r['sm_ratio']:.0f}%"
        climit = ("-" if r.get("cores_limit_ratio") is None
                  else f"{100 * r['cores_limit_ratio']:.0f}%")
        lines.append(f"{r['workload'][:28]:<28} {r['gpu'][:14]:<14} {mem:<24} "
                     f"{_mib(r.get('memory_limit_bytes')):>7} {cores:>6} {climit:>6} "
                     f"{'yes' if r.get('agree') else 'NO':<5} {r.get('last_action') or '-':<14} "
                     f"{r.get('rule', '')}")
    if not status.get("rows"):
        lines.append("(no workloads)")
    return "\n".join(lines)


def top(state_dir: Path | None, once: bool = False, interval: float = 1.0) -> int:
    sock = (state_dir or default_state_dir()) / "agent.sock"
    while True:
        try:
            status = request(sock, {"op": "status"})
        except (OSError, ValueError) as err:
            print(f"gpuwarden top: {err}", file=sys.stderr)
            return 2
        text = render(status)
        if once:
            print(text)
            return 0
        sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
        sys.stdout.flush()
        time.sleep(interval)
