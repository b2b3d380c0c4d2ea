"""Like the real driver, the memory of a process that dies (even by SIGKILL) is given back: the
next NVML query, cuMemGetInfo or failing allocation finds the dead entry and releases it.  A
reused PID is told apart by its start time."""

from __future__ import annotations

import signal
import subprocess

from sim_helpers import Workload, nvml_view

from libvgpu.sim import SIM_CTX_OVERHEAD

MiB = 1 << 20


def test_sigkilled_process_disappears_from_nvml(sim_progs, sim_gpu, workloads):
    w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(2048 * MiB)], sim_gpu.env)
    workloads.append(w)
    before = nvml_view(sim_gpu.env)["devices"][0]
    assert before["processes"] == [{"pid": w.pid, "used": 2048 * MiB + SIM_CTX_OVERHEAD}]
    w.proc.send_signal(signal.SIGKILL)
    w.proc.wait(timeout=30)
    after = nvml_view(sim_gpu.env)["devices"][0]
    assert after["processes"] == []
    assert after["used"] == 0 and after["free"] == after["total"]


def test_a_full_device_reclaims_the_dead_before_saying_out_of_memory(sim_progs, make_sim_gpu,
                                                                      workloads):
    gpu = make_sim_gpu(memory="2GiB")
    w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(1500 * MiB)], gpu.env)
    workloads.append(w)
    # While it lives, the device is too full for another 1500 MiB ...
    subprocess.run([str(sim_progs.cudactl), "ctx", "0", "alloc-oom", str(1500 * MiB)],
                   env=gpu.env, check=True, capture_output=True, timeout=60)
    w.proc.kill()
    w.proc.wait(timeout=30)
    # ... and once it is dead, the allocation (which sweeps only on failure) succeeds.
    out = subprocess.run([str(sim_progs.cudactl), "ctx", "0", "alloc", str(1500 * MiB)],
                         env=gpu.env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout
    assert "alloc 0" in out.stdout


def test_cuMemGetInfo_does_not_count_dead_processes(sim_progs, sim_gpu, workloads):
    w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(700 * MiB)], sim_gpu.env)
    workloads.append(w)
    w.proc.kill()
    w.proc.wait(timeout=30)
    out = subprocess.run([str(sim_progs.cudactl), "ctx", "0", "meminfo"], env=sim_gpu.env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    free, total = (int(x) for x in out.split("meminfo ")[1].split())
    assert total - free == SIM_CTX_OVERHEAD  # only the asking process's own context
