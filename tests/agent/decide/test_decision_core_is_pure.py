"""The decision core (agent.model, agent.decide, agent.shimcheck) imports no I/O library: no
NVML, BCC, netlink, Prometheus, policy or libvgpu, so it runs and is tested on plain literals."""

from __future__ import annotations

import subprocess
import sys


def test_decide_imports_no_io_library() -> None:
    code = ("import sys, agent.decide, agent.model, agent.shimcheck; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'pynvml', 'bcc', 'pyroute2', 'prometheus_client', 'policy', 'libvgpu', 'bpf'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
