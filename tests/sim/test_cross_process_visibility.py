"""One process's allocations are seen by other processes: real pynvml lists it with its memory
(allocations + the simulated context overhead), and cuMemGetInfo in a third process agrees."""

from __future__ import annotations

from sim_helpers import nvml_view

from libvgpu.sim import SIM_CTX_OVERHEAD

MiB = 1 << 20


def test_pynvml_lists_the_allocating_process_with_its_memory(cudaprobe, sim_gpu, workloads):
    w = cudaprobe.hold("init", "primary:0", f"alloc:{192 * MiB}", f"alloc:{64 * MiB}",
                       f"vmmmap:{32 * MiB}", f"async:{3 * MiB}", env=sim_gpu.env)
    workloads.append(w)
    view = nvml_view(sim_gpu.env)
    (dev,) = view["devices"]
    expected = 192 * MiB + 64 * MiB + 32 * MiB + 4 * MiB + SIM_CTX_OVERHEAD  # pool: 2 MiB granules
    assert dev["processes"] == [{"pid": w.pid, "used": expected}]
    assert dev["used"] == expected == dev["v2"]["used"]
    assert dev["free"] == dev["total"] - expected == 80 * 1024 * MiB - expected
    assert dev["name"] == "NVIDIA H200 (gpuwarden simulated)"
    assert dev["uuid"].startswith("GPU-") and len(dev["uuid"]) == 40
    assert w.finish().ok


def test_cuMemGetInfo_in_another_process_sees_the_allocation(cudaprobe, sim_gpu, workloads):
    w = cudaprobe.hold("init", "primary:0", f"alloc:{1024 * MiB}", env=sim_gpu.env)
    workloads.append(w)
    (info,) = cudaprobe.run("init", "primary:0", "info", env=sim_gpu.env).of("info")
    free, total = int(info["free"]), int(info["total"])
    # Both processes' contexts and the first one's gigabyte.
    assert total - free == 1024 * MiB + 2 * SIM_CTX_OVERHEAD
    assert w.finish().ok


def test_two_processes_are_listed_apart_and_freed_memory_disappears(cudaprobe, sim_gpu,
                                                                    workloads):
    a = cudaprobe.hold("init", "primary:0", f"alloc:{100 * MiB}", env=sim_gpu.env)
    b = cudaprobe.hold("init", "primary:0", f"alloc:{300 * MiB}", "free:0", f"alloc:{5 * MiB}",
                       env=sim_gpu.env)
    workloads += [a, b]
    procs = {p["pid"]: p["used"] for p in nvml_view(sim_gpu.env)["devices"][0]["processes"]}
    assert procs == {a.pid: 100 * MiB + SIM_CTX_OVERHEAD, b.pid: 5 * MiB + SIM_CTX_OVERHEAD}
    assert a.finish().ok
    assert b.finish().ok
    after = nvml_view(sim_gpu.env)["devices"][0]
    assert after["processes"] == [] and after["used"] == 0


def test_devices_and_memory_come_from_the_first_creator(cudaprobe, make_sim_gpu, workloads):
    gpu = make_sim_gpu(devices=3, memory="4GiB")
    w = cudaprobe.hold("init", "primary:2", f"alloc:{MiB}", env=gpu.env)
    workloads.append(w)
    # A later process asking for another shape gets the existing devices.
    view = nvml_view({**gpu.env, "GPUWARDEN_SIM_DEVICES": "1", "GPUWARDEN_SIM_MEMORY": "1GiB"})
    assert [d["total"] for d in view["devices"]] == [4 << 30] * 3
    assert [d["index"] for d in view["devices"]] == [0, 1, 2]
    assert len({d["uuid"] for d in view["devices"]}) == 3
    assert [len(d["processes"]) for d in view["devices"]] == [0, 0, 1]
    assert w.finish().ok


def test_two_state_files_are_two_different_gpus(make_sim_gpu):
    # the compute limiter's node region tells GPUs apart by UUID
    first, second = (nvml_view(make_sim_gpu().env)["devices"][0]["uuid"] for _ in range(2))
    assert first != second


def test_cuda_visible_devices_renumbers_the_devices(cudaprobe, make_sim_gpu, workloads):
    """As in CUDA: ordinal 0 of a process with CUDA_VISIBLE_DEVICES=2 is the third GPU (NVML, which
    ignores the variable, shows the allocation there); a UUID prefix names a GPU too."""
    gpu = make_sim_gpu(devices=3, memory="4GiB")
    uuids = [d["uuid"] for d in nvml_view(gpu.env)["devices"]]
    for visible, where in (("2", 2), (uuids[1][:12], 1)):
        env = {**gpu.env, "CUDA_VISIBLE_DEVICES": visible}
        w = cudaprobe.hold("init", "primary:0", f"alloc:{64 * MiB}", env=env)
        workloads.append(w)
        used = [sum(p["used"] for p in d["processes"] if p["pid"] == w.pid)
                for d in nvml_view(gpu.env)["devices"]]
        assert used[where] == 64 * MiB + SIM_CTX_OVERHEAD and sum(used) == used[where], used
        assert w.finish().ok
    # a process that sees one GPU has one ordinal: ordinal 1 does not exist for it
    bad = cudaprobe.run("init", "primary:1", "alloc:1",
                        env={**gpu.env, "CUDA_VISIBLE_DEVICES": "2"})
    assert bad.rc("init") == 0 and bad.rc("primary:1") != 0 and bad.rc("alloc:1") != 0
