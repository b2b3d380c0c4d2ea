"""Helpers for the simulated-driver tests (the fixtures that use them are in conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROGS = Path(__file__).resolve().parent / "progs"
NVML_PROBE = Path(__file__).resolve().parent / "nvml_probe.py"


@dataclass(frozen=True)
class SimProgs:
    cudactl: Path
    driver_paths: Path


def nvml_view(env: dict[str, str], last_seen_us: int = 0) -> dict:
    """What real pynvml reports, queried from a fresh process (see nvml_probe.py)."""
    done = subprocess.run(
        [sys.executable, str(NVML_PROBE), str(last_seen_us)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, f"nvml_probe failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


class Workload:
    """A cudactl process that has run its steps up to `ready` and holds its state."""

    def __init__(self, exe: Path, steps: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [str(exe), *steps, "ready"], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith(("ready", "FAIL")):
                break
        assert self.lines and self.lines[-1] == "ready", f"cudactl: {self.lines}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def finish(self) -> list[str]:
        out, err = self.proc.communicate("go\n", timeout=60)
        assert self.proc.returncode == 0, f"cudactl failed: {out}\n{err}"
        return self.lines + out.splitlines()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=60)
