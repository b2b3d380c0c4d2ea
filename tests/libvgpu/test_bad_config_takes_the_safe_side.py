"""Bad configuration never means "no limit": a malformed CUDA_DEVICE_MEMORY_LIMIT refuses device
memory (the context included) with one message naming the variable; a corrupt or foreign region
file is refused with one message naming the path and what was wrong, and the process admits no
device memory."""

from __future__ import annotations

from cudaprobe import OOM, GiB, Result

from libvgpu.region import REGION_BYTES


def _refused(res: Result) -> bool:
    """The context (device memory too) was refused, as on a full device, and so was every
    allocation after it."""
    allocs = res.of("alloc")
    return res.rc("primary:0") == OOM and bool(allocs) and all(a["rc"] != "0" for a in allocs)


def test_malformed_limit_refuses_memory_with_one_message(shim) -> None:
    res = shim("12Q").result("dlsym", "alloc:1", "alloc:1000")
    assert _refused(res), res.rows
    err = res.stderr
    lines = [ln for ln in err.splitlines() if ln]
    assert len(lines) == 1, err
    assert "CUDA_DEVICE_MEMORY_LIMIT='12Q' is not a memory size" in lines[0]


def test_malformed_device_limit_falls_back_to_the_general_one(shim) -> None:
    rows, err = shim("1g", CUDA_DEVICE_MEMORY_LIMIT_0="lots").run("dlsym", "info")
    assert rows[0]["total"] == str(GiB)
    assert "CUDA_DEVICE_MEMORY_LIMIT_0='lots'" in err and "falls back" in err


def test_foreign_region_file_is_refused(shim) -> None:
    run = shim("1g")
    run.region_path.write_bytes(b"not a region at all\n" * 10)
    res = run.result("dlsym", "alloc:1")
    assert _refused(res), res.rows
    err = res.stderr
    assert str(run.region_path) in err and "refusing this region" in err and "size" in err
    assert run.region_path.read_bytes() == b"not a region at all\n" * 10  # left untouched


def test_region_with_wrong_magic_is_refused(shim) -> None:
    run = shim("1g")
    run.region_path.write_bytes(b"\x01" * REGION_BYTES)
    res = run.result("dlsym", "alloc:1")
    assert _refused(res), res.rows
    assert "not a gpuwarden region" in res.stderr


def test_no_limit_means_the_real_device(shim) -> None:
    rows, err = shim(None).run("dlsym", "info", "alloc:3000000000", "info")
    assert int(rows[0]["total"]) == 80 * GiB
    assert rows[1]["rc"] == "0"
    assert err == ""
