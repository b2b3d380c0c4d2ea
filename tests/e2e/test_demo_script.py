"""examples/demo/run_demo.sh (the README's main command) runs to the end on the simulated GPU
and shows the three outcomes: within limits, out-of-memory through the shim, bypass caught."""

from __future__ import annotations

import os
import subprocess
import sys

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
    # the end points at nothing that is gone: the agent stops, and --keep is how to keep it
    end = out.split("== metrics (from the agent's /metrics)")[1]
    assert "gpuwarden_gpu_slices{" in end
    assert "the agent stops with the demo" in end and "gpuwarden demo --keep" in end
    assert "http://127.0.0.1:" not in end and "top --state-dir" not in end


def test_demo_keep_leaves_a_working_agent_and_says_how_to_stop_it() -> None:
    import re
    import signal
    import time
    import urllib.request

    env = dict(os.environ, GPUWARDEN_DEMO_SIM="1")
    done = subprocess.run(["bash", str(REPO / "examples" / "demo" / "run_demo.sh"), "--keep"],
                          env=env, capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    pid = int(re.search(r"stop it +kill (\d+)", out).group(1))
    try:
        assert done.returncode == 0, out
        port = re.search(r"metrics +http://127\.0\.0\.1:(\d+)/metrics", out).group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
            assert r.status == 200
        state = re.search(r"live table +gpuwarden top --state-dir (\S+)", out).group(1)
        top = subprocess.run([sys.executable, "-m", "gpuwarden", "top", "--once", "--state-dir",
                              state], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert top.returncode == 0, top.stderr
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.1)
