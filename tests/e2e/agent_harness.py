"""Start a real `gpuwarden agent` on a simulated GPU, run workloads through `gpuwarden run`, and
read its audit events and metrics. Used by the end-to-end tests and the agent benchmark."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testbed.procs import wait_for

REPO = Path(__file__).resolve().parents[2]
GPU_JOB_SRC = REPO / "examples" / "demo" / "gpu_job.c"

# A policy for tests: a kill-after-0s rule for namespace "strict", a graceful one for "graceful",
# and an unmanaged block that only alerts (other processes on this machine may use the same
# simulated libcuda; tests must never signal them).
TEST_POLICY = """version 1

defaults {
  gpumem = 1GiB
  gpucores = 0%
  priority = low
  mode = enforce
  on_violation = kill after 2s alert "GpuSliceViolation" severity critical
  compute_grace = 30s
  bypass_tolerance = 64MiB
}

unmanaged {
  gpumem = 0MiB
  on_violation = alert "UnmanagedGpuProcess" severity warning
}

rule "strict" {
  match namespace == "strict"
  on_violation = kill after 0s alert "StrictViolation" severity critical
}

rule "watch-only" {
  match namespace == "watch"
  mode = audit
}

rule "sandbox" {
  match namespace =~ "sandbox-.*"
  deny "GPU use in sandbox namespaces needs approval"
}
"""


def build_gpu_job(out_dir: Path) -> Path:
    from cprog import compile_c

    return compile_c(GPU_JOB_SRC, out_dir, name="gpu_job")


class AgentProc:
    def __init__(self, state_dir: Path, policy: Sequence[str | Path], env: dict[str, str],
                 extra: Sequence[str] = ()) -> None:
        self.state_dir = state_dir
        self.policy = [str(p) for p in policy]
        self.env = dict(env)
        # the repo first; keep what the caller had (a GPU host's carried wheels live there)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), self.env.get("PYTHONPATH", "")) if p)
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.err_path = state_dir.parent / f"{state_dir.name}.agent.err"

    @property
    def audit_path(self) -> Path:
        return self.state_dir / "audit.jsonl"

    def start(self, timeout: float = 90.0, expect_ready: bool = True) -> AgentProc:
        cmd = [sys.executable, "-m", "gpuwarden", "agent", "--state-dir", str(self.state_dir),
               "--metrics-port", "0", "--quiet", *self.extra]
        for p in self.policy:
            cmd += ["--policy", p]
        self._err = self.err_path.open("ab")
        offset = self.err_path.stat().st_size
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=self._err, cwd=REPO)
        if not expect_ready:
            return self
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.err_path.read_bytes()[offset:].decode(errors="replace")
            m = re.findall(r"metrics on http://127\.0\.0\.1:(\d+)/", text)
            if m and "ready;" in text.split("metrics on")[-1]:
                self.port = int(m[-1])
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"agent exited {self.proc.returncode}:\n{text}")
            time.sleep(0.1)
        raise RuntimeError(f"agent not ready in {timeout}s:\n{self.err_path.read_text()}")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text().splitlines() if line]

    def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 15.0,
                   after: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events()[after:]:
                if pred(ev):
                    return ev
            time.sleep(0.05)
        raise AssertionError(f"no matching audit event in {timeout}s; events:\n" +
                             "\n".join(json.dumps(e) for e in self.events()[after:]))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def wait_loops_after(self, t: float, loops: int = 2, timeout: float = 30.0) -> None:
        """Wait until the agent has completed `loops` loops stamped after wall time `t`: what
        was true at `t` has then been sampled and judged at least once (where a fixed sleep
        would pass without a loop on a slow machine)."""
        seen: list[float] = []

        def newer() -> bool:
            ts = self.metric("gpuwarden_agent_last_loop_timestamp_seconds") or 0.0
            if ts > t and (not seen or ts > seen[-1]):
                seen.append(ts)
            return len(seen) >= loops

        wait_for(newer, timeout, f"{loops} agent loops after {t:.3f}")

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        _, text = self.get("/metrics")
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r"([a-zA-Z_:]+)(\{.*\})? (\S+)$", line)
            if not m or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(got.get(k) == v for k, v in (labels or {}).items()):
                return float(m.group(3))
        return None

    def run(self, args: Sequence[str], cmd: Sequence[str | Path],
            env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        full = [sys.executable, "-m", "gpuwarden", "run", "--state-dir", str(self.state_dir),
                *args, "--", *[str(c) for c in cmd]]
        return subprocess.Popen(full, env=env or self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._err.close()
        return int(self.proc.returncode)


def write_policy(d: Path, text: str = TEST_POLICY) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "test.gwp").write_text(text)
    return d


def pid_alive(pid: int) -> bool:
    """The process runs: it exists and is no zombie (a child of the test's own that exited and
    was not reaped yet still takes signals)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"
