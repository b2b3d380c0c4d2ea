"""A process that runs with libvgpu preloaded but allocates around it (glibc's own dlsym to the
real cuMemAlloc_v2) is stopped as soon as eBPF sees it pass its slice by one allocation
granularity (64 MiB), even with the context tolerance of examples/policies (768 MiB): with kill
after 0s the crossing allocation never returns."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_harness import REPO, AgentProc, write_policy

pytestmark = [pytest.mark.bpf, pytest.mark.slow]

POLICY = """version 1

defaults {
  gpumem = 1GiB
  on_violation = kill after 0s alert "SliceViolation" severity critical
  bypass_tolerance = 768MiB
}

unmanaged {
  gpumem = 0MiB
  on_violation = alert "UnmanagedGpuProcess" severity warning
}
"""


@pytest.fixture(scope="module")
def around(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("around") / "alloc_around_shim"
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror",
                    f"-I{REPO / 'libvgpu' / 'include'}",
                    str(Path(__file__).parent / "progs" / "alloc_around_shim.c"), "-ldl", "-o",
                    str(exe)], check=True)
    return exe


def test_allocation_around_the_shim_is_killed_at_the_slice(start_agent, around: Path,
                                                           tmp_path: Path) -> None:
    agent: AgentProc = start_agent(policy=[write_policy(tmp_path / "pol", POLICY)])
    # 640 MiB through the shim (+ its context), then 960 MiB around it: eBPF would see 1.6 GiB
    p = agent.run(["--namespace", "tenant", "--name", "around"],
                  ["sh", "-c", f"sleep 1; exec {around} 640 960 5000"])
    out, _ = p.communicate(timeout=60)
    assert p.returncode == -9 and "holding" not in out, out
    kk = agent.wait_event(lambda e: e.get("action") == "kernel_kill")
    assert kk["workload"]["pod"] == "around"
    assert kk["limit_bytes"] == (1 << 30) + (64 << 20)
