"""examples/demo/run_demo.sh (the README's main command) runs to the end on the simulated GPU
and shows the three outcomes: within limits, out-of-memory through the shim, bypass caught."""

from __future__ import annotations

import os
import subprocess

import pytest
from agent_harness import REPO

pytestmark = [pytest.mark.bpf, pytest.mark.slow]


def test_demo_script_shows_three_outcomes() -> None:
    env = dict(os.environ, GPUWARDEN_DEMO_SIM="1")
    done = subprocess.run(["bash", str(REPO / "examples" / "demo" / "run_demo.sh")], env=env,
                          capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "holding 256 MiB for 5000 ms" in out and "(workload 1 exit status 0)" in out
    assert "out of memory after 512 MiB of 2048" in out and "exit status 3" in out
    assert "exit status 143 = SIGTERM" in out
    assert "serving/bypass   alert" in out and "verdict=bypass" in out
    assert "serving/within" in out.split("live table while workload 1 runs")[1]
    assert "gpuwarden_ebpf_up 1.0" in out
