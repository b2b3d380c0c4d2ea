"""Like the real driver, the memory of a process that dies (even by SIGKILL) is given back: the
next NVML query, cuMemGetInfo or failing allocation finds the dead entry and releases it.  A
reused PID is told apart by its start time."""

from __future__ import annotations

import signal

from cudaprobe import OOM
from sim_helpers import nvml_view

from libvgpu.sim import SIM_CTX_OVERHEAD

MiB = 1 << 20


def test_sigkilled_process_disappears_from_nvml(cudaprobe, sim_gpu, workloads):
    w = cudaprobe.hold("init", "primary:0", f"alloc:{2048 * MiB}", env=sim_gpu.env)
    workloads.append(w)
    before = nvml_view(sim_gpu.env)["devices"][0]
    assert before["processes"] == [{"pid": w.pid, "used": 2048 * MiB + SIM_CTX_OVERHEAD}]
    w.proc.send_signal(signal.SIGKILL)
    w.proc.wait(timeout=30)
    after = nvml_view(sim_gpu.env)["devices"][0]
    assert after["processes"] == []
    assert after["used"] == 0 and after["free"] == after["total"]


def test_a_full_device_reclaims_the_dead_before_saying_out_of_memory(cudaprobe, make_sim_gpu,
                                                                      workloads):
    gpu = make_sim_gpu(memory="2GiB")
    w = cudaprobe.hold("init", "primary:0", f"alloc:{1500 * MiB}", env=gpu.env)
    workloads.append(w)
    # While it lives, the device is too full for another 1500 MiB ...
    full = cudaprobe.run("init", "primary:0", f"alloc:{1500 * MiB}", env=gpu.env)
    assert full.rc(f"alloc:{1500 * MiB}") == OOM
    w.proc.kill()
    w.proc.wait(timeout=30)
    # ... and once it is dead, the allocation (which sweeps only on failure) succeeds.
    after = cudaprobe.run("init", "primary:0", f"alloc:{1500 * MiB}", env=gpu.env)
    assert after.ok, after.rows


def test_cuMemGetInfo_does_not_count_dead_processes(cudaprobe, sim_gpu, workloads):
    w = cudaprobe.hold("init", "primary:0", f"alloc:{700 * MiB}", env=sim_gpu.env)
    workloads.append(w)
    w.proc.kill()
    w.proc.wait(timeout=30)
    (info,) = cudaprobe.run("init", "primary:0", "info", env=sim_gpu.env).of("info")
    free, total = int(info["free"]), int(info["total"])
    assert total - free == SIM_CTX_OVERHEAD  # only the asking process's own context
