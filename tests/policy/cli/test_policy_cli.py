"""`gpuwarden policy check | fmt | explain | test`: output, JSON, and the exit codes
0 clean / 1 bad input / 2 usage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwarden.cli import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "policies"
PODS = REPO / "examples" / "pods"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["policy", *argv])
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = 'version 1\n\nrule "r" {\n  match namespace == "a"\n  mode = audit\n}\n'
WARN = 'version 1\n\nrule "r" {\n  match namespace == "a" and namespace == "b"\n  mode = audit\n}\n'
BAD = 'version 1\n\nrule "r" {\n  mode = loud\n}\n'


def test_check_clean_is_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(write(tmp_path, "g.gwp", GOOD)))
    assert code == 0 and out.startswith("ok: 1 files, 1 rules, digest ")


def test_check_error_is_1_with_location(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "b.gwp", BAD)
    code, out, _ = run(capsys, "check", str(path))
    assert code == 1
    assert f"{path}:4:10: error[GW006]: invalid mode `loud`" in out or (
        "b.gwp:4:10: error[GW006]: invalid mode `loud`" in out)
    assert "          ^^^^" in out and "FAILED" in out


def test_check_warnings_pass_unless_strict(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = str(write(tmp_path, "w.gwp", WARN))
    code, out, _ = run(capsys, "check", path)
    assert code == 0 and "warning[GW101]" in out
    assert run(capsys, "check", "--strict", path)[0] == 1


def test_check_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "--format", "json", str(write(tmp_path, "b.gwp", BAD)))
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["digest"] is None
    [d] = data["diagnostics"]
    assert (d["code"], d["line"], d["column"], d["severity"]) == ("GW006", 4, 10, "error")


def test_usage_errors_are_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "check", str(tmp_path / "missing.gwp"))[0] == 2
    assert run(capsys, "check")[0] == 2
    assert run(capsys, "check", "--format", "yaml", str(tmp_path))[0] == 2
    assert run(capsys, "fmt", str(tmp_path / "missing.gwp"))[0] == 2
    assert run(capsys)[0] == 2


def test_fmt_check_diff_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messy = write(tmp_path, "m.gwp", 'version 1\nrule "r"{\n mode audit\n}\n')
    code, out, _ = run(capsys, "fmt", "--check", str(messy))
    assert code == 1 and "would reformat" in out
    code, out, _ = run(capsys, "fmt", "--diff", str(messy))
    assert code == 1 and "-rule \"r\"{" in out and "+  mode = audit" in out  # would change
    code, out, _ = run(capsys, "fmt", str(messy))
    assert code == 0 and out == 'version 1\n\nrule "r" {\n  mode = audit\n}\n'
    assert messy.read_text() != out  # printing does not write
    assert run(capsys, "fmt", "-w", str(messy))[0] == 0
    assert messy.read_text() == out
    assert run(capsys, "fmt", "--check", str(tmp_path))[0] == 0
    assert run(capsys, "fmt", "--diff", str(messy)) == (0, "", "")  # formatted: no diff, 0


def test_fmt_refuses_unparsable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "fmt", str(write(tmp_path, "x.gwp", "version 1\nrule {\n")))
    assert code == 1 and "error[GW001]" in err


def test_explain_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", str(EXAMPLES), str(PODS / "notebook.yaml"))
    assert code == 0
    assert "container 'notebook': ALLOWED" in out
    assert 'gpumem            8GiB' in out and "<- notebooks" in out
    code, out, _ = run(capsys, "explain", "--format", "json", str(EXAMPLES),
                       str(PODS / "training-too-big.yaml"))
    data = json.loads(out)
    [pod] = data["pods"]
    [c] = pod["containers"]
    assert code == 1 and c["allowed"] is False  # a denied pod fails, as a CI gate
    assert c["effective"]["decided_by"]["denied"] == "training"
    assert [m["rule"] for m in c["matched"]] == ["training", "cluster-caps"]


def test_explain_fails_for_a_denied_pod_unless_exit_zero(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", str(EXAMPLES), str(PODS / "training-too-big.yaml"),
                         str(PODS / "notebook.yaml"))
    assert code == 1 and "DENIED" in out and "ALLOWED" in out
    assert "explain: denied by the policy: ml-train/llm-finetune" in err
    code, out, err = run(capsys, "explain", "--exit-zero", str(EXAMPLES),
                         str(PODS / "training-too-big.yaml"))
    assert code == 0 and "DENIED" in out and "(--exit-zero)" in err


def test_check_shows_warnings_beside_errors(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """One run shows every problem: a contradictory rule's warning is not hidden by an error
    in another rule, nor in another file that does not even parse."""
    write(tmp_path, "w.gwp", WARN)
    write(tmp_path, "b.gwp", BAD.replace('"r"', '"s"'))
    code, out, _ = run(capsys, "check", str(tmp_path))
    assert code == 1 and "error[GW006]" in out and "warning[GW101]" in out
    assert "1 errors, 1 warnings" in out
    (tmp_path / "b.gwp").write_text("version 1\nrule {\n")
    code, out, _ = run(capsys, "check", str(tmp_path))
    assert code == 1 and "error[GW001]" in out and "warning[GW101]" in out


def test_explain_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path, "p.yaml", "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                "    - name: c\n      resources: {limits: {example.com/vram: 3000}}\n")
    code, out, _ = run(capsys, "explain", "--format", "json", "-n", "serving",
                       "--resource-name", "gpumem=example.com/vram",
                       "--node-label", "gpuwarden.io/pool=shared", str(EXAMPLES), str(pod))
    [c] = json.loads(out)["pods"][0]["containers"]
    assert code == 0 and c["request"]["gpumem_mib"] == 3000
    assert c["effective"]["core_policy"] == "force"
    assert c["effective"]["decided_by"]["priority"] == "inference"
    assert run(capsys, "explain", "--resource-name", "vram=x", str(EXAMPLES), str(pod))[0] == 2


def test_explain_bad_pod_names_the_place(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path, "p.yaml", "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                "    - name: c\n      resources: {limits: {nvidia.com/gpumem: 3Gi}}\n")
    code, _, err = run(capsys, "explain", str(EXAMPLES), str(pod))
    assert code == 1
    assert "container \"c\".resources.limits['nvidia.com/gpumem'] = '3Gi'" in err
    assert "whole number of MiB" in err
    broken = write(tmp_path, "y.yaml", "kind: Pod\nmetadata: [\n")
    code, _, err = run(capsys, "explain", str(EXAMPLES), str(broken))
    assert code == 1 and "invalid YAML" in err and "y.yaml:" in err


def test_explain_with_broken_policy_is_1(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "explain", str(write(tmp_path, "b.gwp", BAD)),
                       str(PODS / "notebook.yaml"))
    assert code == 1 and "GW006" in err


def test_test_command_reports_failures_like_promtool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    write(tmp_path, "p.gwp", GOOD)
    write(tmp_path, "t_test.yaml",
          "policy: p.gwp\ntests:\n  - name: audited\n    workload: {namespace: a}\n"
          "    expect: {mode: audit}\n  - name: wrong\n    workload: {namespace: a}\n"
          "    expect: {mode: enforce, gpumem: 4GiB}\n")
    code, out, _ = run(capsys, "test", str(tmp_path))
    assert code == 1
    assert "Unit Testing: " in out and "FAILED:" in out
    assert "t_test.yaml:6: test 'wrong'" in out
    assert 'mode: expected enforce, got audit (audit set by rule "r")' in out
    assert "gpumem: expected 4GiB, got 5000MiB" in out
    assert out.rstrip().endswith("1 passed, 1 failed")
    code, out, _ = run(capsys, "test", "--format", "json", str(tmp_path / "t_test.yaml"))
    data = json.loads(out)
    assert (data["tests"], data["failed"]) == (2, 1)


def test_test_file_typos_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "p.gwp", GOOD)
    write(tmp_path, "t_test.yaml", "policy: p.gwp\ntests:\n  - name: x\n"
          "    workload: {namespace: a}\n    expect: {mdoe: audit}\n")
    code, out, _ = run(capsys, "test", str(tmp_path))
    assert code == 1
    assert "t_test.yaml:5: unknown key `mdoe` in expect (did you mean `mode`?)" in out


def test_no_test_files_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "test", str(tmp_path))[0] == 2


def test_entry_point_runs_as_a_process() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpuwarden", "policy", "check", str(EXAMPLES)],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 errors, 0 warnings" in proc.stdout
