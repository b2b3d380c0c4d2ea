"""Simulated kernels occupy the device's timeline, so NVML utilization is real: a process that
keeps the device busy half the time shows about 50%, per device and per process, and
nvmlDeviceGetProcessUtilization honours lastSeenTimeStamp."""

from __future__ import annotations

import time

import pytest
from cudaprobe import Result
from sim_helpers import nvml_view


@pytest.mark.slow
def test_half_duty_cycle_reads_about_fifty_percent(cudaprobe, sim_gpu):
    # 20 ms kernels with 20 ms pauses; NVML's window is the last second, read while the loop
    # runs: once the first 1.2 s of it are done (its row), during the next 2 s.
    with cudaprobe.start("init", "primary:0", "duty:20:20:1200", "duty:20:20:2000",
                         env=sim_gpu.env) as proc:
        proc.wait_for("duty:20:20:1200")
        dev = nvml_view(sim_gpu.env)["devices"][0]
        done = proc.finish(timeout=30)
    assert done.ok, done.rows
    assert 40 <= dev["gpu_util"] <= 60, dev
    (sample,) = dev["samples"]
    assert sample["pid"] == proc.pid
    assert 40 <= sample["smUtil"] <= 60, sample


def test_idle_device_reads_zero_and_full_queue_reads_hundred(cudaprobe, sim_gpu, workloads):
    idle = cudaprobe.hold("init", "primary:0", env=sim_gpu.env)
    workloads.append(idle)
    assert nvml_view(sim_gpu.env)["devices"][0]["gpu_util"] == 0
    # 2 s of queued kernels: after the first second the window is fully busy.
    busy = cudaprobe.hold("init", "primary:0", "launch:20:100000", "sleep:1100", env=sim_gpu.env)
    workloads.append(busy)
    dev = nvml_view(sim_gpu.env)["devices"][0]
    assert dev["gpu_util"] >= 97
    by_pid = {s["pid"]: s["smUtil"] for s in dev["samples"]}
    assert by_pid[busy.pid] >= 97 and by_pid[idle.pid] == 0


def test_process_samples_are_only_those_newer_than_last_seen(cudaprobe, sim_gpu, workloads):
    w = cudaprobe.hold("init", "primary:0", "launch:1:50000", "sync", env=sim_gpu.env)
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
    assert w.finish().ok


def test_kernel_scale_stretches_kernels(cudaprobe, make_sim_gpu, workloads):
    gpu = make_sim_gpu(kernel_scale=10.0)
    # One 100 ms kernel (10 ms grid x 10), then look right away: the device is busy.
    w = cudaprobe.hold("init", "primary:0", "launch:1:10000", "sleep:60", env=gpu.env)
    workloads.append(w)
    t0 = time.monotonic()
    assert w.finish().ok
    dev = nvml_view(gpu.env)["devices"][0]
    assert dev["gpu_util"] >= 9  # 100 ms of the last second
    assert time.monotonic() - t0 < 5


def _sync_ms(done: Result) -> float:
    (row,) = done.of("sync")
    return int(row["ns"]) / 1e6


def test_jitter_lengthens_each_kernel_by_up_to_its_share(cudaprobe, sim_gpu):
    # 200 kernels of 1 ms, queued at once: 200 ms on a steady GPU; up to 20 % longer each,
    # drawn uniformly, ~220 ms (the sum of 200 draws lies within a few ms of it).
    plain = cudaprobe.run("init", "primary:0", "launch:200:1000", "sync", env=sim_gpu.env)
    varied = cudaprobe.run("init", "primary:0", "launch:200:1000", "sync",
                           env={**sim_gpu.env, "GPUWARDEN_SIM_JITTER": "20"})
    assert plain.ok and varied.ok, (plain.rows, varied.rows)
    assert 195 <= _sync_ms(plain) <= 205, plain.rows
    assert 212 <= _sync_ms(varied) <= 230, varied.rows


@pytest.mark.parametrize("value", ["20%", "-1", "101", "x"])
def test_a_bad_jitter_is_named_and_kernels_keep_their_time(cudaprobe, sim_gpu, value):
    done = cudaprobe.run("init", "primary:0", "launch:100:1000", "sync",
                         env={**sim_gpu.env, "GPUWARDEN_SIM_JITTER": value})
    assert done.ok, done.rows
    assert f'GPUWARDEN_SIM_JITTER="{value}" is not valid' in done.stderr
    assert "percentage from 0 to 100" in done.stderr
    assert 95 <= _sync_ms(done) <= 105, done.rows
