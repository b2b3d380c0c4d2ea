"""`gpuwarden top`: a live table per workload and GPU, from the agent's control socket."""

from __future__ import annotations

import io
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from agent.control import request
from agent.ledger import default_state_dir

__all__ = ["render", "top"]


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / (1 << 20):.0f}"


def _pct(r: float | None) -> str:
    return "-" if r is None else f"{100 * r:.0f}%"  # used/cap: "28%/30%"


def render(status: dict[str, Any], width: int = 80) -> str:
    """The table as text fitted to `width` columns (rich shortens the long cells)."""
    from rich.console import Console
    from rich.table import Table

    h = status.get("health", {})
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False,
                  collapse_padding=True)
    # Numbers keep their width; on a narrow screen the names share what is left and are
    # shortened with an ellipsis (rich would otherwise drop whole columns).
    narrow = width < 120
    free = max(18, width - 53)  # 53: the fixed columns below and the spaces between them
    wl, rule = (max(12, free * 2 // 3), max(6, free - max(12, free * 2 // 3))) if narrow else (
        None, None)
    table.add_column("WORKLOAD", overflow="ellipsis", no_wrap=True, max_width=wl)
    table.add_column("GPU", overflow="ellipsis", no_wrap=True, max_width=8 if narrow else 12)
    table.add_column("MiB shim/ebpf/nvml" if not narrow else "MiB s/e/n", no_wrap=True,
                     min_width=14)
    table.add_column("LIMIT", justify="right", no_wrap=True, min_width=5)
    table.add_column("CORES", justify="right", no_wrap=True, min_width=7)
    table.add_column("OK", no_wrap=True, min_width=3)
    table.add_column("ACTION", overflow="ellipsis", no_wrap=True, max_width=8 if narrow else 16)
    table.add_column("RULE", overflow="ellipsis", no_wrap=True, max_width=rule)
    for r in status.get("rows", []):
        u = r.get("used", {})
        cores = f"{_pct(r.get('sm_ratio'))}/{_pct(r.get('cores_limit_ratio'))}"
        table.add_row(r["workload"], r["gpu"], "/".join(_mib(u.get(k)) for k in
                                                         ("shim", "ebpf", "nvml")),
                      _mib(r.get("memory_limit_bytes")), cores,
                      "yes" if r.get("agree") else "NO", r.get("last_action") or "-",
                      r.get("rule", ""))
    console = Console(width=width, file=io.StringIO(), color_system=None, highlight=False,
                      emoji=False)
    console.print(f"gpuwarden top   policy {str(h.get('policy_digest', ''))[:12]}   "
                  f"ebpf {h.get('ebpf')}   nvml {h.get('nvml')}   workloads "
                  f"{h.get('workloads')}", overflow="ellipsis", no_wrap=True, markup=False)
    console.print()
    console.print(table)
    if not status.get("rows"):
        console.print("(no workloads)")
    out = console.file.getvalue()  # type: ignore[attr-defined]  # the StringIO given above
    return "\n".join(line.rstrip() for line in out.splitlines())


def top(state_dir: Path | None, once: bool = False, interval: float = 1.0) -> int:
    sock = (state_dir or default_state_dir()) / "agent.sock"
    while True:
        try:
            status = request(sock, {"op": "status"})
        except (OSError, ValueError) as err:
            print(f"gpuwarden top: {err}", file=sys.stderr)
            return 2
        text = render(status, shutil.get_terminal_size().columns)
        if once:
            print(text)
            return 0
        sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
        sys.stdout.flush()
        time.sleep(interval)
