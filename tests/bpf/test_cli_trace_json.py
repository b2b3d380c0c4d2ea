"""`gpuwarden bpf trace`: one JSON object per interval and a final one listing each process
with its name, its launches, and per device what eBPF counted since attaching beside what NVML
says it holds (memory held from before the probes attached shows there); `--duration` is the
command's whole run time, the probes' compilation included, and the command ends at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

from bpf.cli import process_rows

REPO = Path(__file__).resolve().parents[2]


def trace(driver: Driver, *args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-m", "gpuwarden.cli", "bpf", "trace", *args,
                          "--lib", str(driver.lib)], cwd=REPO, env=driver.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    for line in p.stderr:  # wait until the probes are attached
        if "attached to" in line:
            assert str(driver.lib) in line and "nvml on" in line, line
            return p
    raise AssertionError(f"trace never attached: {p.wait()}")


def sim_uuid(driver: Driver, index: int) -> str:
    code = ("import pynvml; pynvml.nvmlInit(); "
            f"print(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex({index})))")
    return subprocess.run([sys.executable, "-c", code], env=driver.env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.bpf
def test_json_intervals_and_final_processes(cudaprobe: CudaProbe, driver: Driver) -> None:
    held = cudaprobe.start("init", "ctx:1", "alloc:65536", "wait", env=driver.env)  # before
    held.wait_for()
    tr = trace(driver, "--json", "--duration", "25", "--interval", "1")
    proc = cudaprobe.start("init", "ctx:2", "alloc:123456", "launch:9:1", "wait", env=driver.env)
    proc.wait_for()
    out, err = tr.communicate(timeout=60)
    for p in (proc, held):
        p.resume()
        p.finish()
    assert tr.returncode == 0, err
    reports = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in reports][-1] == "final"
    assert all(r["type"] == "interval" for r in reports[:-1]) and len(reports) >= 3
    final = reports[-1]
    rows = {p["pid"]: p for p in final["processes"]}
    mine = rows[proc.pid]
    assert mine["comm"] == "cudaprobe" and mine["launches"] == 9
    [dev] = mine["devices"]
    assert dev["device"] == 2 and dev["gpu_uuid"] == sim_uuid(driver, 2)
    assert dev["ebpf_bytes"] == 123456 and dev["nvml_bytes"] >= 123456  # context included
    [before] = rows[held.pid]["devices"]  # allocated before the probes attached
    assert before["gpu_uuid"] == sim_uuid(driver, 1) and before["nvml_bytes"] >= 65536
    assert before["ebpf_bytes"] == 0
    assert final["lost"] == 0 and final["nvml"] == "on"
    assert sum(r["events"] for r in reports) >= 2  # ctx create + alloc, at least


@pytest.mark.bpf
def test_duration_is_the_whole_run_and_the_table_lists_the_process(
        cudaprobe: CudaProbe, driver: Driver) -> None:
    t0 = time.monotonic()
    tr = trace(driver, "--duration", "12", "--interval", "1", "--no-launch-counters")
    proc = cudaprobe.start("init", "primary:1", "alloc:4321", "launch:2:1", "wait", env=driver.env)
    proc.wait_for()
    out, _ = tr.communicate(timeout=60)
    took = time.monotonic() - t0
    proc.resume()
    proc.finish()
    assert took < 12 + 3, took  # not 12 s after a compilation of several, nor a slow detach
    final = out.split("-- final")[1]
    row = next(line.split() for line in final.splitlines() if line.split()[:1] == [str(proc.pid)])
    assert row[1:3] == ["cudaprobe", "1"] and row[4] == "0.0"  # 4321 B = 0.0 MiB by eBPF
    assert row[-1] == "0"  # launches not counted: counters are off


def test_rows_join_ebpf_and_nvml_per_process() -> None:
    comm = {1: "a", 2: "b", 3: "c"}.get
    rows = process_rows(
        {1: {-1: 100}, 3: {0: 5, 1: 6}}, {1: 7},
        {1: {"GPU-x": 400}, 2: {"GPU-y": 900}, 3: {"GPU-x": 1, "GPU-y": 2}},
        lambda pid: comm(pid) or "-")
    assert rows[0] == {"pid": 1, "comm": "a", "launches": 7, "devices": [
        {"device": None, "gpu_uuid": "GPU-x", "ebpf_bytes": 100, "nvml_bytes": 400}]}
    assert rows[1]["devices"] == [  # held from before attaching: NVML only
        {"device": None, "gpu_uuid": "GPU-y", "ebpf_bytes": 0, "nvml_bytes": 900}]
    assert [(d["device"], d["gpu_uuid"]) for d in rows[2]["devices"]] == [
        (0, None), (1, None), (None, "GPU-x"), (None, "GPU-y")]  # two GPUs: not guessed
