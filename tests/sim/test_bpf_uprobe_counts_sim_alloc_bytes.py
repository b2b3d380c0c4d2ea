"""A real BCC uprobe on the simulated libcuda's cuMemAlloc_v2 counts, exactly, the bytes a
separate process allocated; real pynvml lists that process with that memory (plus the
simulated context).  This is the eBPF audit path, end to end, on a machine without a GPU."""

from __future__ import annotations

import pytest
from sim_helpers import PROGS, nvml_view

from libvgpu.paths import sim_lib_dir
from libvgpu.sim import SIM_CTX_OVERHEAD

MiB = 1 << 20


@pytest.mark.bpf
def test_uprobe_counts_the_bytes_another_process_allocated(cudaprobe, sim_gpu):
    from bcc import BPF

    libcuda = (sim_lib_dir() / "libcuda.so.1").resolve()
    sizes = [100 * MiB, 28 * MiB, 4096, 1536]
    steps = [f"alloc:{size}" for size in sizes]
    # Not cuMemAlloc_v2: must not be counted.
    steps += [f"async:{8 * MiB}", f"vmmmap:{2 * MiB}"]
    proc = cudaprobe.start("init", "primary:0", "wait", *steps, "wait", env=sim_gpu.env)
    bpf = BPF(src_file=bytes(PROGS / "alloc_bytes.bpf.c"))
    try:
        proc.wait_for()  # context made, nothing allocated yet
        bpf.attach_uprobe(name=bytes(libcuda), sym=b"cuMemAlloc_v2", fn_name=b"on_cuMemAlloc_v2",
                          pid=proc.pid)
        proc.resume()
        rows = proc.wait_for()  # all allocations done, memory held
        assert all(r["rc"] == "0" for r in rows), rows

        counted = {k.value: v.value for k, v in bpf[b"alloc_bytes"].items()}
        calls = {k.value: v.value for k, v in bpf[b"alloc_calls"].items()}
        assert counted == {proc.pid: sum(sizes)}
        assert calls == {proc.pid: len(sizes)}

        # The driver's own view, through real pynvml: the same process and its memory.
        (dev,) = nvml_view(sim_gpu.env)["devices"]
        (listed,) = dev["processes"]
        assert listed["pid"] == proc.pid
        # cuMemAlloc_v2 bytes (counted by the probe) + 8 MiB pool + 2 MiB VMM + context.
        assert listed["used"] == sum(sizes) + 8 * MiB + 2 * MiB + SIM_CTX_OVERHEAD
    finally:
        bpf.cleanup()
        proc.kill()
