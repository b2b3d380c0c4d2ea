"""The node agent in cluster mode beside a test bed node, as the node-side plugin tests run it:
`gpuwarden agent --kubernetes` over a plugin's region root, in audit mode, its audit log read back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from testbed.node import Node
from testbed.procs import wait_for

__all__ = ["AUDIT_POLICY", "PluginProcess", "audit_event", "cluster_agent", "pod_sim_env"]

REPO = Path(__file__).resolve().parents[2]

# Every GPU container judged, none signalled: the tests read the verdicts from the audit log.
AUDIT_POLICY = """version 1

defaults {
  gpumem = 4GiB
  mode = audit
}
"""


@contextlib.contextmanager
def cluster_agent(node: Node, env: Mapping[str, str], regions_root: Path,
                  folder: Path) -> Iterator[Path]:
    """Run the agent for `node` over `regions_root` (policy, log and state in `folder`) until
    the block ends; yields the path of its audit log."""
    (folder / "policy.gwp").write_text(AUDIT_POLICY)
    log = folder / "agent.log"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuwarden", "agent", "--kubernetes", "--node", node.name,
             "--kubeconfig", str(node.cp.admin_kubeconfig), "--regions-root",
             str(regions_root), "--state-dir", str(folder / "state"), "--policy",
             str(folder / "policy.gwp"), "--no-ebpf", "--quiet"],
            env=dict(env), stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
        try:
            wait_for(lambda: "ready;" in log.read_text() or proc.poll() is not None, 60,
                     "the agent starting")
            assert proc.poll() is None, log.read_text()
            yield folder / "state" / "audit.jsonl"
        finally:
            proc.terminate()
            proc.wait(15)


def audit_event(path: Path, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The first audit record that `pred` accepts, or None (also while the log does not exist)."""
    if not path.exists():
        return None
    records: list[dict[str, Any]] = [json.loads(line) for line in path.read_text().splitlines()]
    return next((e for e in records if pred(e)), None)


def pod_sim_env(folder: Path) -> dict[str, str]:
    """The environment of a node-side plugin over a simulated GPU (2 × 8 GiB) whose state folder
    (in `folder`, made writable for the pods' users) is mounted into pods as their driver."""
    from libvgpu.sim import sim_env

    os.chmod(folder, 0o777)
    env = dict(os.environ)
    env.update(sim_env(folder / "gpu.state", devices=2, memory="8GiB"))
    env["PYTHONPATH"] = str(REPO)
    return env


class PluginProcess:
    """A `gpuwarden` node-side plugin run as a child process, its stderr in `log`."""

    def __init__(self, log: Path, env: Mapping[str, str]) -> None:
        self.log, self.env = log, dict(env)
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self, args: list[str]) -> None:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "gpuwarden", *args],
                                         env=self.env, stdout=subprocess.DEVNULL,
                                         stderr=err, cwd=REPO)

    def stop(self) -> int:
        """SIGTERM (when still running) and its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)
        return int(self.proc.returncode)
