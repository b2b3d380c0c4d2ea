"""Bad command-line values are refused with the flag's name and what would be valid (exit 2),
never a traceback, never accepted (a NaN tick spun at 100 % of a core): ports, periods, waits;
a metrics port in use; a sim state file in a folder that does not exist; an empty pods file for
`policy explain`; a reload that crashes names the policy files."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.reload import PolicyWatcher
from gpuwarden.cli import main

REPO = Path(__file__).resolve().parents[3]
POLICIES = REPO / "examples" / "policies"


@pytest.mark.parametrize(("argv", "flag", "valid"), [
    (["agent", "--policy", "p", "--metrics-port", "-1"], "--metrics-port", "0..65535"),
    (["agent", "--policy", "p", "--metrics-port", "99999"], "--metrics-port", "0..65535"),
    (["agent", "--policy", "p", "--tick", "nan"], "--tick", "> 0 and <= 60"),
    (["agent", "--policy", "p", "--tick", "inf"], "--tick", "> 0 and <= 60"),
    (["top", "--interval", "-1"], "--interval", "> 0 and <= 3600"),
    (["top", "--interval", "nan"], "--interval", "> 0 and <= 3600"),
    (["run", "--wait", "-1", "--", "true"], "--wait", ">= 0"),
    (["bpf", "trace", "--duration", "0"], "--duration", "> 0"),
    (["agent", "--policy", "p", "--split-count", "0"], "--split-count", "slices: use 1..1024"),
    (["agent", "--policy", "p", "--split-count", "many"], "--split-count", "1..1024"),
])
def test_bad_flag_value_names_the_flag_and_what_is_valid(
        argv: list[str], flag: str, valid: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}:" in err and valid in err and "Traceback" not in err


def test_a_split_count_in_cluster_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "--policy", "p", "--kubernetes", "--split-count", "20"]) == 2
    err = capsys.readouterr().err
    assert "--split-count is for standalone admission" in err and "deviceSplitCount" in err


def _gpuwarden(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwarden", *argv], capture_output=True,
                          text=True, timeout=120)


def test_a_metrics_port_in_use_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _gpuwarden("agent", "--policy", str(POLICIES), "--state-dir", str(tmp_path),
                         "--no-ebpf", "--quiet", "--metrics-port", str(port))
    assert res.returncode == 2, res.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in res.stderr
    assert "Traceback" not in res.stderr


def test_sim_state_in_a_missing_folder_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "env", "--state", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err
    assert "--state" in err and "/nonexistent does not exist" in err


def test_explain_with_an_empty_pods_file_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "explain", str(POLICIES), "/dev/null"]) == 1
    assert "/dev/null: holds no Kubernetes object" in capsys.readouterr().err


def test_a_crashing_reload_names_the_policy_files(tmp_path: Path) -> None:
    (tmp_path / "p.gwp").write_text("version 1\n")
    calls = []

    def loader(paths: list[str]):
        calls.append(1)
        if len(calls) > 1:
            raise OverflowError("int too large to convert")
        return type("R", (), {"ok": True, "diagnostics": [],
                              "policy": type("P", (), {"digest": "d1"})()})()

    w = PolicyWatcher([str(tmp_path)], loader=loader)
    w.load_initial()
    (tmp_path / "p.gwp").write_text("version 1\n# changed\n")
    outcome = w.poll(force=True)
    assert outcome is not None and not outcome.ok
    assert str(tmp_path) in outcome.message and "OverflowError" in outcome.message
