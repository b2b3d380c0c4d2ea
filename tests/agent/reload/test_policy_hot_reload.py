"""Hot reload sees writes, renames and moves into the watched directory; a bad policy keeps the
last good one and counts an error; an invalid policy at start refuses to start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.reload import PolicyError, PolicyWatcher


@dataclass
class FakePolicy:
    digest: str


@dataclass
class FakeResult:
    policy: FakePolicy | None
    diagnostics: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.policy is not None


def loader(paths: list[str]) -> FakeResult:
    """Valid when every *.gwp file's text starts with 'version 1'; digest = sorted texts."""
    texts = []
    for f in sorted(Path(paths[0]).glob("*.gwp")):
        t = f.read_text()
        if not t.startswith("version 1"):
            return FakeResult(None, [f"{f}:1:1: error[GW001]: expected 'version 1'"])
        texts.append(t.strip().replace("version 1", "").strip())
    return FakeResult(FakePolicy("+".join(texts)))


class Clock:
    t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def watcher(d: Path) -> PolicyWatcher:
    w = PolicyWatcher([str(d)], loader=loader, interval=0.5, clock=Clock())
    w.load_initial()
    return w


def test_invalid_policy_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text("nonsense")
    with pytest.raises(PolicyError, match=r"a.gwp:1:1: error\[GW001\]"):
        PolicyWatcher([str(tmp_path)], loader=loader).load_initial()
    with pytest.raises(PolicyError, match="no such file"):
        PolicyWatcher([str(tmp_path / "absent")], loader=loader).load_initial()


def test_write_reloads_and_bad_write_keeps_last_good(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text("version 1 A")
    w = watcher(tmp_path)
    assert w.digest == "A" and w.poll() is None
    (tmp_path / "a.gwp").write_text("version 1 B")
    out = w.poll()
    assert out is not None and out.ok and w.digest == "B" and w.reloads_total == 1
    (tmp_path / "a.gwp").write_text("broken")
    out = w.poll()
    assert out is not None and not out.ok and "GW001" in out.message
    assert w.digest == "B" and w.policy == FakePolicy("B")
    assert w.reload_errors_total == 1 and not w.last_reload_ok
    assert w.poll() is None  # same bad content: no second error
    (tmp_path / "a.gwp").write_text("version 1 C")
    assert w.poll() is not None and w.digest == "C" and w.last_reload_ok


def test_rename_and_move_in_are_seen(tmp_path: Path) -> None:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "a.gwp").write_text("version 1 A")
    w = watcher(d)
    os.rename(d / "a.gwp", d / "a.txt")  # renamed away: no policy file left
    out = w.poll()
    assert out is not None and out.ok and w.policy == FakePolicy("")
    staged = tmp_path / "new.gwp"
    staged.write_text("version 1 N")
    os.rename(staged, d / "n.gwp")  # atomic move-in, as editors and ConfigMaps do
    out = w.poll()
    assert out is not None and out.ok and w.digest == "N"


def test_poll_waits_for_the_interval(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text("version 1 A")
    now = [0.0]
    w = PolicyWatcher([str(tmp_path)], loader=loader, interval=0.5, clock=lambda: now[0])
    w.load_initial()
    (tmp_path / "a.gwp").write_text("version 1 B")
    now[0] = 0.2
    assert w.poll() is None
    now[0] = 0.6
    assert w.poll() is not None and w.digest == "B"
