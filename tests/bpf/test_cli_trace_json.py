"""`gpuwarden bpf trace --json` prints one JSON object per interval and a final one that maps
pid -> device -> bytes from the kernel ledger, with launches and lost events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bpf_harness import Driver, Ops

pytestmark = pytest.mark.bpf

REPO = Path(__file__).resolve().parents[2]


def test_json_intervals_and_final_ledger(cuda_ops: Path, driver: Driver) -> None:
    trace = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden.cli", "bpf", "trace", "--json",
         "--duration", "6", "--interval", "1", "--lib", str(driver.lib)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert trace.stderr is not None
    banner = trace.stderr.readline()
    assert "attached to" in banner and str(driver.lib) in banner, banner
    proc = Ops(cuda_ops, driver, ["init", "ctx", "2", "alloc", "123456", "launch", "9", "wait"])
    proc.wait_for()
    out, err = trace.communicate(timeout=60)
    proc.resume()
    proc.finish()
    assert trace.returncode == 0, err
    reports = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in reports][-1] == "final"
    assert all(r["type"] == "interval" for r in reports[:-1]) and len(reports) >= 3
    final = reports[-1]
    assert final["ledger"][str(proc.pid)] == {"2": 123456}
    assert final["launches"][str(proc.pid)] == 9
    assert final["lost"] == 0
    assert sum(r["events"] for r in reports) >= 2  # ctx create + alloc, at least


def test_human_table_lists_the_process(cuda_ops: Path, driver: Driver) -> None:
    trace = subprocess.Popen(
        [sys.executable, "-m", "gpuwarden.cli", "bpf", "trace", "--duration", "3",
         "--interval", "1", "--no-launch-counters", "--lib", str(driver.lib)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert trace.stderr is not None and "attached to" in trace.stderr.readline()
    proc = Ops(cuda_ops, driver, ["init", "primary", "1", "alloc", "4321", "launch", "2", "wait"])
    proc.wait_for()
    out, _ = trace.communicate(timeout=60)
    proc.resume()
    proc.finish()
    final = out.split("-- final")[1]
    row = next(line.split() for line in final.splitlines() if line.split()[:1] == [str(proc.pid)])
    assert row[1:] == ["cuda_ops", "1", "4321", "0"]  # launches not counted: counters are off
