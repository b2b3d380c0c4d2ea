"""Simulated kernels occupy the device's timeline, so NVML utilization is real: a process that
keeps the device busy half the time shows about 50%, per device and per process, and
nvmlDeviceGetProcessUtilization honours lastSeenTimeStamp."""

from __future__ import annotations

import subprocess
import time

import pytest
from sim_helpers import Workload, nvml_view


@pytest.mark.slow
def test_half_duty_cycle_reads_about_fifty_percent(sim_progs, sim_gpu):
    # 20 ms kernels with 20 ms pauses for 3 s; NVML's window is the last second, read while
    # the loop runs.
    proc = subprocess.Popen([str(sim_progs.cudactl), "ctx", "0", "duty", "20", "20", "3000"],
                            env=sim_gpu.env, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.3)
        dev = nvml_view(sim_gpu.env)["devices"][0]
    finally:
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert 40 <= dev["gpu_util"] <= 60, dev
    (sample,) = dev["samples"]
    assert sample["pid"] == proc.pid
    assert 40 <= sample["smUtil"] <= 60, sample


def test_idle_device_reads_zero_and_full_queue_reads_hundred(sim_progs, sim_gpu, workloads):
    idle = Workload(sim_progs.cudactl, ["ctx", "0"], sim_gpu.env)
    workloads.append(idle)
    assert nvml_view(sim_gpu.env)["devices"][0]["gpu_util"] == 0
    # 2 s of queued kernels: after the first second the window is fully busy.
    busy = Workload(sim_progs.cudactl, ["ctx", "0", "launch", "100000", "20", "sleep", "1100"],
                    sim_gpu.env)
    workloads.append(busy)
    dev = nvml_view(sim_gpu.env)["devices"][0]
    assert dev["gpu_util"] >= 97
    by_pid = {s["pid"]: s["smUtil"] for s in dev["samples"]}
    assert by_pid[busy.pid] >= 97 and by_pid[idle.pid] == 0


def test_process_samples_are_only_those_newer_than_last_seen(sim_progs, sim_gpu, workloads):
    w = Workload(sim_progs.cudactl, ["ctx", "0", "launch", "50000", "1", "sync"], sim_gpu.env)
    workloads.append(w)
    first = nvml_view(sim_gpu.env)["devices"][0]["samples"]
    (s1,) = first
    assert s1["smUtil"] > 0
    # Nothing ran since s1's timestamp: asked from there, the process is idle.
    (s2,) = nvml_view(sim_gpu.env, last_seen_us=s1["timeStamp"])["devices"][0]["samples"]
    assert s2["timeStamp"] > s1["timeStamp"] and s2["smUtil"] == 0
    # A timestamp in the future has no newer samples: NVML_ERROR_NOT_FOUND.
    future = int(time.time() * 1e6) + 60_000_000
    assert nvml_view(sim_gpu.env, last_seen_us=future)["devices"][0]["samples"] is None
    w.finish()


def test_kernel_scale_stretches_kernels(sim_progs, make_sim_gpu, workloads):
    gpu = make_sim_gpu(kernel_scale=10.0)
    # One 100 ms kernel (10 ms grid x 10), then look right away: the device is busy.
    w = Workload(sim_progs.cudactl, ["ctx", "0", "launch", "10000", "1", "sleep", "60"], gpu.env)
    workloads.append(w)
    t0 = time.monotonic()
    w.finish()
    dev = nvml_view(gpu.env)["devices"][0]
    assert dev["gpu_util"] >= 9  # 100 ms of the last second
    assert time.monotonic() - t0 < 5
