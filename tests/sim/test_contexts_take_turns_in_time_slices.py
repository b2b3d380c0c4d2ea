"""With a time slice (GPUWARDEN_SIM_TIMESLICE), the simulated GPU alternates between processes
that have kernels queued, as a real GPU alternates between contexts: a newcomer waits for the
running process's slice, not for its whole queue; two busy processes each get half the device,
in NVML's view too; a dead process's queue leaves the device.  Without one (0), kernels run in
launch order whoever queued them: the same newcomer waits for the whole queue ahead of it."""

from __future__ import annotations

import pytest
from sim_helpers import nvml_view

from libvgpu.sim import SimInputError, sim_env

SLICE_US = 2000


def _ms(row: dict[str, str]) -> float:
    return int(row["ns"]) / 1e6


@pytest.mark.parametrize("timeslice_us", [SLICE_US, 0])
def test_a_newcomer_waits_a_time_slice_not_the_queue_ahead_of_it(cudaprobe, make_sim_gpu,
                                                                  timeslice_us):
    gpu = make_sim_gpu(timeslice_us=timeslice_us)
    # 2 s of 10-ms kernels queued, then one 1-ms kernel from another process.
    with cudaprobe.start("init", "primary:0", "launch:200:10000", "wait", "sync",
                         env=gpu.env) as first:
        first.wait_for("wait")
        newcomer = cudaprobe.run("init", "primary:0", "launch:1:1000", "sync", env=gpu.env)
        first.resume()
        whole = first.finish(timeout=30)
    assert newcomer.ok and whole.ok, (newcomer.rows, whole.rows)
    waited = _ms(newcomer.of("sync")[0])
    if timeslice_us:
        # the rest of the running slice (<= 2 ms), then its own 1 ms; the rest is this host
        assert waited < 50, waited
    else:
        assert waited > 1000, waited  # first in, first out: behind the whole queue


@pytest.mark.slow
def test_two_busy_processes_each_get_half_the_device(cudaprobe, make_sim_gpu):
    gpu = make_sim_gpu(timeslice_us=SLICE_US)
    # 1 s of 10-ms kernels each, queued at about the same moment.
    with cudaprobe.start("init", "primary:0", "launch:100:10000", "sync",
                         env=gpu.env) as a, \
            cudaprobe.start("init", "primary:0", "launch:100:10000", "sleep:1050", "sync",
                            env=gpu.env) as b:
        b.wait_for("sleep:1050")  # the last second: both had kernels queued all of it
        dev = nvml_view(gpu.env)["devices"][0]
        done_a, done_b = a.finish(timeout=30), b.finish(timeout=30)
    assert done_a.ok and done_b.ok, (done_a.rows, done_b.rows)
    by_pid = {s["pid"]: s["smUtil"] for s in dev["samples"]}
    assert dev["gpu_util"] >= 97, dev
    assert 40 <= by_pid[a.pid] <= 60 and 40 <= by_pid[b.pid] <= 60, by_pid
    # Alone, a's second of work ends after a second; shared in turns, near the end of both.
    assert _ms(done_a.of("sync")[0]) > 1700, done_a.rows


def test_a_killed_process_s_queue_leaves_the_device(cudaprobe, make_sim_gpu):
    gpu = make_sim_gpu(timeslice_us=SLICE_US)
    doomed = cudaprobe.start("init", "primary:0", "launch:1000:10000", "wait", env=gpu.env)
    doomed.wait_for("wait")  # 10 s queued
    doomed.kill()
    nvml_view(gpu.env)  # NVML's queries find the dead process, as the driver would
    # 100 ms of work: about 100 ms alone, 200 if the dead queue still took its turns.
    after = cudaprobe.run("init", "primary:0", "launch:100:1000", "sync", env=gpu.env)
    assert after.ok, after.rows
    assert _ms(after.of("sync")[0]) < 150, after.rows


@pytest.mark.parametrize("value", ["2ms", "-1", "1000001", " 5"])
def test_a_bad_time_slice_is_named_and_leaves_no_state(cudaprobe, sim_gpu, value):
    env = {**sim_gpu.env, "GPUWARDEN_SIM_TIMESLICE": value}
    done = cudaprobe.run("init", env=env)
    assert done.rc("init") == 3  # CUDA_ERROR_NOT_INITIALIZED
    assert f'GPUWARDEN_SIM_TIMESLICE="{value}" is not valid' in done.stderr
    assert "microseconds" in done.stderr
    assert not sim_gpu.state_path.exists() or sim_gpu.state_path.stat().st_size == 0


@pytest.mark.parametrize("value", [-1, 1_000_001, 1.5, True])
def test_sim_env_refuses_a_bad_time_slice(tmp_path, value):
    with pytest.raises(SimInputError, match=r"timeslice_us.*0 to 1000000"):
        sim_env(tmp_path / "s.state", timeslice_us=value)


@pytest.mark.slow
def test_a_switch_between_processes_costs_the_device_its_time(cudaprobe, make_sim_gpu):
    # 2-ms slices, 200 µs a switch: two busy processes share 2 / 2.2 of the device's time, and
    # NVML counts only the kernels; alone, a process pays no switch.
    gpu = make_sim_gpu(timeslice_us=SLICE_US)
    env = {**gpu.env, "GPUWARDEN_SIM_SWITCH": "200"}
    alone = cudaprobe.run("init", "primary:0", "launch:50:10000", "sync", env=env)
    assert alone.ok, alone.rows
    assert 495 <= _ms(alone.of("sync")[0]) <= 520, alone.rows
    with cudaprobe.start("init", "primary:0", "launch:100:10000", "sync", env=env) as a, \
            cudaprobe.start("init", "primary:0", "launch:100:10000", "sleep:1050", "sync",
                            env=env) as b:
        b.wait_for("sleep:1050")
        dev = nvml_view(env)["devices"][0]
        done_a, done_b = a.finish(timeout=30), b.finish(timeout=30)
    assert done_a.ok and done_b.ok, (done_a.rows, done_b.rows)
    assert 86 <= dev["gpu_util"] <= 95, dev  # 2 / 2.2: 91 %
    by_pid = {s["pid"]: s["smUtil"] for s in dev["samples"]}
    assert 40 <= by_pid[a.pid] <= 50 and 40 <= by_pid[b.pid] <= 50, by_pid


@pytest.mark.parametrize(("value", "timeslice_us"),
                         [("50us", SLICE_US), ("-1", SLICE_US), ("100001", SLICE_US), ("50", 0)])
def test_a_bad_switch_cost_is_named_and_leaves_no_state(cudaprobe, make_sim_gpu, value,
                                                        timeslice_us):
    gpu = make_sim_gpu(timeslice_us=timeslice_us)
    done = cudaprobe.run("init", env={**gpu.env, "GPUWARDEN_SIM_SWITCH": value})
    assert done.rc("init") == 3  # CUDA_ERROR_NOT_INITIALIZED
    assert f'GPUWARDEN_SIM_SWITCH="{value}" is not valid' in done.stderr
    assert "time-sliced device" in done.stderr
    assert not gpu.state_path.exists() or gpu.state_path.stat().st_size == 0
