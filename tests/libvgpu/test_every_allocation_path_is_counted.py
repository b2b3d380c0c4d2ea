"""Every device-memory path is counted against the container's limit with the size the issue
asks for, and given back when freed: cuMemAlloc_v2, cuMemAllocPitch_v2 (real pitch x height),
cuMemAllocManaged, cuMemAllocAsync / cuMemAllocFromPoolAsync / cuMemFreeAsync, cuMemCreate /
cuMemRelease, cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate; reached through
dlsym, through cuGetProcAddress and through direct linking. Over the limit each returns
CUDA_ERROR_OUT_OF_MEMORY."""

from __future__ import annotations

import pytest
from cudaprobe import OOM, MiB

# op, bytes the shim must count (sim pitch is rounded up to 512: 1000*4 bytes -> 4096)
PATHS = [
    ("alloc:1000000", 1_000_000),
    ("pitch:1000:300:4", 1024 * 300),  # width 1000 bytes: the sim's pitch is 1024
    ("managed:1000000", 1_000_000),
    ("async:1000000", 1_000_000),
    ("pool:1000000", 1_000_000),
    ("vmm:2097152:0", 2_097_152),
    ("array:100:50:float:4", 100 * 50 * 4 * 4),
    ("array3d:100:50:7:u8:1", 100 * 50 * 7),
    ("mip:64:32:0:half:2:3", (64 * 32 + 32 * 16 + 16 * 8) * 2 * 2),  # 3 levels
]


@pytest.mark.parametrize(("op", "nbytes"), PATHS, ids=[p[0].split(":")[0] for p in PATHS])
@pytest.mark.parametrize("mode", ["dlsym", "procaddr", "direct"])
def test_path_counts_exact_bytes_and_frees_them(shim, mode: str, op: str, nbytes: int) -> None:
    rows, _ = shim("1g").run(mode, "info", op, "info", "free:0", "info")
    before, made, during, freed, after = rows
    assert made["rc"] == "0" and freed["rc"] == "0"
    if op.startswith("pitch"):
        assert made["pitch"] == "1024"
    assert int(before["free"]) - int(during["free"]) == nbytes
    assert after["free"] == before["free"]
    assert before["total"] == str(2**30)


@pytest.mark.parametrize(
    "op",
    ["alloc:", "pitch:", "managed:", "async:", "pool:", "vmm:", "array:", "array3d:", "mip:"],
)
def test_path_over_the_limit_is_out_of_memory(shim, op: str) -> None:
    big = {
        "alloc:": "alloc:2000000000",
        "pitch:": "pitch:100000:20000:4",
        "managed:": "managed:2000000000",
        "async:": "async:2000000000",
        "pool:": "pool:2000000000",
        "vmm:": "vmm:2000000000:0",
        "array:": "array:30000:30000:float:4",
        "array3d:": "array3d:2000:1000:1000:u8:1",
        "mip:": "mip:30000:30000:0:half:2:4",
    }[op]
    rows, _ = shim("1g").run("dlsym", big, "info")
    assert rows[0]["rc"] == str(OOM)
    # nothing stays counted after a refusal (pitch: allocated, then freed again)
    full = shim(None).run("dlsym", "info")[0][0]
    assert int(rows[1]["free"]) == 2**30 - (int(full["total"]) - int(full["free"]))


def test_free_of_unknown_pointer_passes_through(shim, sim_gpu, cudaprobe) -> None:
    plain = cudaprobe.run("init", "primary:0", "freeunknown", env=sim_gpu.env)
    rows, _ = shim("1g").run("dlsym", "info", "freeunknown", "info")
    assert rows[1]["rc"] == str(plain.rc("freeunknown"))  # the driver's own answer
    assert rows[0]["free"] == rows[2]["free"]


def test_created_context_is_counted_like_the_primary(shim) -> None:
    rows, _ = shim("1g").run("dlsym", "ctx:0", "info", "alloc:1000", "info")
    assert int(rows[0]["free"]) - int(rows[2]["free"]) == 1000
    assert int(rows[0]["free"]) == 2**30 - 300 * MiB  # the sim's context overhead
