"""Helpers for the simulated-driver tests (the fixtures that use them are in conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROGS = Path(__file__).resolve().parent / "progs"
NVML_PROBE = Path(__file__).resolve().parent / "nvml_probe.py"


def nvml_view(env: dict[str, str], last_seen_us: int = 0) -> dict:
    """What real pynvml reports, queried from a fresh process (see nvml_probe.py)."""
    done = subprocess.run(
        [sys.executable, str(NVML_PROBE), str(last_seen_us)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, f"nvml_probe failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)
