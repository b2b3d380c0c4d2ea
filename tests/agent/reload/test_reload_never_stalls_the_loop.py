"""A policy reload never stalls enforcement: it runs on a thread of its own, the loop only takes
finished outcomes. A loader that takes long (a 1 MB identifier) or never returns (a FIFO named
*.gwp) leaves the loop's steps as short as ever; a FIFO or device among the policy files is
hashed by what it is, never read."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.daemon import Agent, AgentConfig
from agent.reload import PolicyWatcher, ReloadThread, content_hash

POLICY = """version 1

defaults {
  gpumem = 1GiB
}
"""


@dataclass
class Result:
    policy: object
    diagnostics: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return True


def test_a_slow_reload_is_taken_by_the_loop_only_when_finished(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text("one")
    release = threading.Event()
    calls = []

    def loader(paths: list[str]) -> Result:
        calls.append(1)
        if len(calls) > 1:  # every reload after the first load takes until released
            release.wait(30)
        return Result(type("P", (), {"digest": f"d{len(calls)}"})())

    watcher = PolicyWatcher([str(tmp_path)], loader=loader, interval=0.02)
    watcher.load_initial()
    woken = threading.Event()
    reloader = ReloadThread(watcher, woken.set)
    reloader.start()
    try:
        (tmp_path / "a.gwp").write_text("two")
        deadline = time.monotonic() + 10
        while reloader.busy_since is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reloader.busy_since is not None, "the reload never started"
        t0 = time.monotonic()
        assert reloader.take() is None  # the loop is not held by the running reload
        assert time.monotonic() - t0 < 0.05
        assert reloader.stalled_seconds() > 0
        release.set()
        assert woken.wait(10)
        outcome = reloader.take()
        assert outcome is not None and outcome.ok and outcome.digest == "d2"
    finally:
        release.set()
        reloader.stop()


def test_content_hash_never_reads_a_fifo_or_a_device(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text(POLICY)
    os.mkfifo(tmp_path / "fifo.gwp")
    (tmp_path / "zero.gwp").symlink_to("/dev/zero")
    done = threading.Event()
    digests: list[str] = []
    threading.Thread(target=lambda: (digests.append(content_hash([str(tmp_path)])), done.set()),
                     daemon=True).start()
    try:
        assert done.wait(5), "hashing the policy folder blocked on a FIFO or /dev/zero"
    finally:
        _unblock(tmp_path / "fifo.gwp")


def test_a_fifo_in_the_policy_folder_never_stalls_the_loop(tmp_path: Path, no_nvml) -> None:
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "p.gwp").write_text(POLICY)
    cfg = AgentConfig(policy_paths=[str(policy)], state_dir=tmp_path / "state", ebpf=False,
                      tick_seconds=0.1, nvml_seconds=0.1)
    agent = Agent(cfg, nvml_lib=no_nvml)
    agent.start()
    fifo = policy / "evil.gwp"
    os.mkfifo(fifo)
    (policy / "p.gwp").write_text(POLICY + "# changed: a reload is due\n")
    steps: list[float] = []
    done = threading.Event()

    def loop() -> None:
        end = time.monotonic() + 2.0  # several reload polls (every 0.5 s)
        while time.monotonic() < end:
            t0 = time.monotonic()
            agent.step(max_wait=0.05)
            steps.append(time.monotonic() - t0)
        done.set()

    threading.Thread(target=loop, daemon=True).start()
    try:
        assert done.wait(15), f"the loop stalled after {len(steps)} steps"
        assert max(steps) < 0.5, f"a step took {max(steps):.2f} s"
    finally:
        _unblock(fifo)
        agent.close()


def _unblock(fifo: Path) -> None:
    """Let a reader stuck on the FIFO (the old behaviour) go: open its other end and close it."""
    with contextlib.suppress(OSError):  # no reader: nothing is stuck
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
