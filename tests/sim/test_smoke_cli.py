"""`gpuwarden sim smoke`: a C workload on a fresh simulated GPU, seen through real pynvml —
the process with its memory and about half the SM time, then nothing after it exits."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_smoke_shows_the_workload_then_its_release() -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwarden", "sim", "smoke", "--seconds", "1.2"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    pid = int(re.search(r"workload pid (\d+)", out).group(1))
    # 1024 MiB + 256 MiB pool + 512 MiB VMM + 300 MiB context = 2092 MiB.
    held, after = out.split("== after the workload exited")
    assert f"process {pid}: 2092 MiB" in held
    assert "memory used 2092 MiB of 16384 MiB" in held
    sm = int(re.search(rf"process {pid}: .* SM (\d+)%", held).group(1))
    assert 35 <= sm <= 65
    assert "processes: none" in after and "memory used 0 MiB" in after


def test_smoke_rejects_a_bad_duration() -> None:
    done = subprocess.run([sys.executable, "-m", "gpuwarden", "sim", "smoke", "--seconds", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--seconds" in done.stderr and "0.2 to 60" in done.stderr
