"""Bad input to `gpuwarden run` and to the control socket gets a clear message naming the input
and what would be valid; an unreachable agent names the socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.control import ControlServer, request
from agent.rules import parse_size_mib, request_from_flags

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("text", "mib"), [("3GiB", 3072), ("3000", 3000), ("512MiB", 512),
                                           ("1T", 1 << 20), ("2048KiB", 2), ("512M", 512),
                                           ("512Mi", 512), ("1.5GiB", 1536), ("3000m", 3000)])
def test_sizes(text: str, mib: int) -> None:
    assert parse_size_mib(text) == mib


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"gpumem": "3 furlongs"}, "--gpumem '3 furlongs': `3 furlongs` is not a size"),
    ({"gpumem": "3GB"}, "--gpumem '3GB': unknown size unit `GB`; did you mean `3GiB`?"),
    ({"gpumem": "1GiB", "gpumem_percentage": 10}, "give one of them, not both"),
    ({"gpumem_percentage": 0}, "--gpumem-percentage 0: use 1..100"),
    ({"gpucores": 101}, "--gpucores 101: use 0..100"),
    ({"gpucores": "30 %"}, "--gpucores '30 %': use 0..100 or 0%..100%"),
    ({"priority": "urgent"}, "--priority 'urgent': use high or low"),
    ({"gpu": 0}, "--gpu 0: use 1 or more"),
])
def test_bad_flags_are_named(kwargs: dict[str, Any], message: str) -> None:
    args = {"gpumem": None, "gpumem_percentage": None, "gpucores": None, "priority": None,
            "gpu": None, **kwargs}
    with pytest.raises(ValueError) as err:
        request_from_flags(**args)
    assert message in str(err.value)


def test_gpucores_is_written_as_policies_write_it() -> None:
    base = {"gpumem": None, "gpumem_percentage": None, "priority": None, "gpu": None}
    assert request_from_flags(**base, gpucores="30%")["gpucores"] == 30
    assert request_from_flags(**base, gpucores="30")["gpucores"] == 30


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwarden", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def test_run_reports_bad_label_and_missing_agent(tmp_path: Path) -> None:
    done = run_cli("run", "--state-dir", str(tmp_path), "--label", "oops", "--", "true")
    assert done.returncode == 2 and "--label 'oops': expected KEY=VALUE" in done.stderr
    done = run_cli("run", "--state-dir", str(tmp_path), "--wait", "0", "--", "true")
    assert done.returncode == 2
    assert f"cannot reach the gpuwarden agent at {tmp_path}/agent.sock" in done.stderr
    done = run_cli("run", "--state-dir", str(tmp_path))
    assert done.returncode == 2 and "no command given" in done.stderr


class FakeAgent:
    def __init__(self) -> None:
        self.peers: list[int] = []

    def admit(self, req: dict[str, Any], pid: int) -> dict[str, Any]:
        self.peers.append(pid)
        return {"ok": True, "echo": req["name"]}

    def status(self) -> dict[str, Any]:
        return {"ok": True, "rows": []}


def test_control_socket_answers_and_rejects(tmp_path: Path) -> None:
    import os

    agent = FakeAgent()
    srv = ControlServer(tmp_path / "agent.sock", agent)
    srv.start()
    try:
        assert request(tmp_path / "agent.sock", {"op": "admit", "name": "x"}) == {
            "ok": True, "echo": "x"}
        assert agent.peers == [os.getpid()]  # from SO_PEERCRED, not from the request
        bad = request(tmp_path / "agent.sock", {"op": "reboot"})
        assert not bad["ok"] and "unknown op 'reboot'" in bad["error"]
        assert "valid: admit, status" in bad["error"]
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(tmp_path / "agent.sock"))
        s.sendall(b"not json\n")
        answer = json.loads(s.makefile().readline())
        s.close()
        assert not answer["ok"] and "bad request on the control socket" in answer["error"]
    finally:
        srv.close()
    assert not (tmp_path / "agent.sock").exists()


def test_run_waits_for_an_agent_that_is_still_starting(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`gpuwarden agent ... &` then `gpuwarden run ...` at once: run waits for the socket."""
    import threading

    from agent.runner import admit

    sock = tmp_path / "agent.sock"
    servers: list[ControlServer] = []
    started = threading.Event()

    def late_start() -> None:
        while "waiting up to" not in capsys.readouterr().err:  # run is already waiting
            threading.Event().wait(0.01)
        servers.append(ControlServer(sock, FakeAgent()))
        servers[0].start()
        started.set()

    t = threading.Thread(target=late_start)
    t.start()
    try:
        assert admit(sock, {"op": "admit", "name": "late"}, wait=30) == {"ok": True,
                                                                          "echo": "late"}
        assert started.is_set()
    finally:
        t.join(5)
        for srv in servers:
            srv.close()


@pytest.mark.parametrize("command", ["agent", "run", "top", "demo"])
def test_every_option_says_what_it_does(command: str) -> None:
    import argparse

    from gpuwarden.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [a.option_strings or [a.dest] for a in sub.choices[command]._actions
               if not isinstance(a, argparse._HelpAction) and not (a.help or "").strip()]
    assert not missing, f"`gpuwarden {command}` options without help: {missing}"
