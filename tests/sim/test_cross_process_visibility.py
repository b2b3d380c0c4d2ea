"""One process's allocations are seen by other processes: real pynvml lists it with its memory
(allocations + the simulated context overhead), and cuMemGetInfo in a third process agrees."""

from __future__ import annotations

import subprocess

from sim_helpers import Workload, nvml_view

from libvgpu.sim import SIM_CTX_OVERHEAD

MiB = 1 << 20


def test_pynvml_lists_the_allocating_process_with_its_memory(sim_progs, sim_gpu, workloads):
    w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(192 * MiB), "alloc", str(64 * MiB),
                                     "vmm", str(32 * MiB), "allocasync", str(3 * MiB)],
                 sim_gpu.env)
    workloads.append(w)
    view = nvml_view(sim_gpu.env)
    (dev,) = view["devices"]
    expected = 192 * MiB + 64 * MiB + 32 * MiB + 4 * MiB + SIM_CTX_OVERHEAD  # pool: 2 MiB granules
    assert dev["processes"] == [{"pid": w.pid, "used": expected}]
    assert dev["used"] == expected == dev["v2"]["used"]
    assert dev["free"] == dev["total"] - expected == 80 * 1024 * MiB - expected
    assert dev["name"] == "NVIDIA H200 (gpuwarden simulated)"
    assert dev["uuid"].startswith("GPU-") and len(dev["uuid"]) == 40
    w.finish()


def test_cuMemGetInfo_in_another_process_sees_the_allocation(sim_progs, sim_gpu, workloads):
    w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(1024 * MiB)], sim_gpu.env)
    workloads.append(w)
    out = subprocess.run([str(sim_progs.cudactl), "ctx", "0", "meminfo"], env=sim_gpu.env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    free, total = (int(x) for x in out.split("meminfo ")[1].split())
    # Both processes' contexts and the first one's gigabyte.
    assert total - free == 1024 * MiB + 2 * SIM_CTX_OVERHEAD
    w.finish()


def test_two_processes_are_listed_apart_and_freed_memory_disappears(sim_progs, sim_gpu,
                                                                    workloads):
    a = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(100 * MiB)], sim_gpu.env)
    b = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(300 * MiB), "free", "0",
                                     "alloc", str(5 * MiB)], sim_gpu.env)
    workloads += [a, b]
    procs = {p["pid"]: p["used"] for p in nvml_view(sim_gpu.env)["devices"][0]["processes"]}
    assert procs == {a.pid: 100 * MiB + SIM_CTX_OVERHEAD, b.pid: 5 * MiB + SIM_CTX_OVERHEAD}
    a.finish()
    b.finish()
    after = nvml_view(sim_gpu.env)["devices"][0]
    assert after["processes"] == [] and after["used"] == 0


def test_devices_and_memory_come_from_the_first_creator(sim_progs, make_sim_gpu, workloads):
    gpu = make_sim_gpu(devices=3, memory="4GiB")
    w = Workload(sim_progs.cudactl, ["ctx", "2", "alloc", str(MiB)], gpu.env)
    workloads.append(w)
    # A later process asking for another shape gets the existing devices.
    view = nvml_view({**gpu.env, "GPUWARDEN_SIM_DEVICES": "1", "GPUWARDEN_SIM_MEMORY": "1GiB"})
    assert [d["total"] for d in view["devices"]] == [4 << 30] * 3
    assert [d["index"] for d in view["devices"]] == [0, 1, 2]
    assert len({d["uuid"] for d in view["devices"]}) == 3
    assert [len(d["processes"]) for d in view["devices"]] == [0, 0, 1]
    w.finish()


def test_two_state_files_are_two_different_gpus(make_sim_gpu):
    # the compute limiter's node region tells GPUs apart by UUID
    first, second = (nvml_view(make_sim_gpu().env)["devices"][0]["uuid"] for _ in range(2))
    assert first != second


def test_cuda_visible_devices_renumbers_the_devices(sim_progs, make_sim_gpu, workloads):
    """As in CUDA: ordinal 0 of a process with CUDA_VISIBLE_DEVICES=2 is the third GPU (NVML, which
    ignores the variable, shows the allocation there); a UUID prefix names a GPU too."""
    gpu = make_sim_gpu(devices=3, memory="4GiB")
    uuids = [d["uuid"] for d in nvml_view(gpu.env)["devices"]]
    for visible, where in (("2", 2), (uuids[1][:12], 1)):
        env = {**gpu.env, "CUDA_VISIBLE_DEVICES": visible}
        w = Workload(sim_progs.cudactl, ["ctx", "0", "alloc", str(64 * MiB)], env)
        workloads.append(w)
        used = [sum(p["used"] for p in d["processes"] if p["pid"] == w.pid)
                for d in nvml_view(gpu.env)["devices"]]
        assert used[where] == 64 * MiB + SIM_CTX_OVERHEAD and sum(used) == used[where], used
        w.finish()
    # a process that sees one GPU has one ordinal: ordinal 1 does not exist for it
    bad = subprocess.run([str(sim_progs.cudactl), "ctx", "1", "alloc", "1"],
                         env={**gpu.env, "CUDA_VISIBLE_DEVICES": "2"}, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0
