"""Every allocation family is sized the way the driver sized it: pitch x height from the
out-parameter, VMM on the device named in the allocation properties, arrays from their
descriptors, managed / async / pool allocations; and each family's free brings it back."""

from __future__ import annotations

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe, Running

pytestmark = pytest.mark.bpf

FLOAT, UINT8, HALF = 0x20, 0x01, 0x10


def _mipmap_bytes(w: int, h: int, d: int, elem: int, levels: int) -> int:
    total = 0
    h, d = max(h, 1), max(d, 1)
    for _ in range(levels):
        total += w * h * d * elem
        w, h, d = max(w // 2, 1), max(h // 2, 1), max(d // 2, 1)
    return total


def _hold(
    audit, cudaprobe: CudaProbe, driver: Driver, ops: list[str]
) -> tuple[Running, dict[int, int]]:
    proc = cudaprobe.start("init", "primary:0", *ops, "wait", "freeall", "wait", env=driver.env)
    proc.wait_for()
    held = audit.snapshot().get(proc.pid, {})
    return proc, held


def _release(audit, proc: Running) -> dict[int, int]:
    proc.resume()
    proc.wait_for()
    after = audit.snapshot().get(proc.pid, {})
    proc.resume()
    proc.finish()
    return after


def test_pitch_counts_pitch_times_height(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc, held = _hold(audit, cudaprobe, driver, ["pitch:1000:300:4"])
    fields = proc.result().of("pitch")[0]
    pitch = int(fields["pitch"])
    assert pitch >= 1000
    assert held == {0: pitch * 300}
    assert _release(audit, proc) == {0: 0}


def test_vmm_create_is_on_the_device_of_its_properties(
    audit, cudaprobe: CudaProbe, driver: Driver
) -> None:
    # The caller's current context is on device 0; the VMM handle says device 1.
    proc, held = _hold(audit, cudaprobe, driver, ["vmm:2097152:1", "vmm:4194304:0"])
    assert held == {1: 2097152, 0: 4194304}
    assert _release(audit, proc) == {0: 0, 1: 0}
    kinds = [e.kind for e in audit.poll_events() if e.pid == proc.pid]
    assert kinds.count("vmm_create") == 2 and kinds.count("vmm_release") == 2


def test_arrays_are_sized_from_their_descriptors(
    audit, cudaprobe: CudaProbe, driver: Driver
) -> None:
    ops = [
        f"array:640:480:{FLOAT}:4",
        f"array:1000:0:{UINT8}:1",  # 1D: height 0
        f"array3d:64:32:16:{HALF}:2",
        f"mip:256:128:0:{FLOAT}:1:5",
    ]  # fmt: skip
    proc, held = _hold(audit, cudaprobe, driver, ops)
    expected = (
        640 * 480 * 4 * 4 + 1000 * 1 + 64 * 32 * 16 * 2 * 2 + _mipmap_bytes(256, 128, 0, 4, 5)
    )
    assert held == {0: expected}
    assert _release(audit, proc) == {0: 0}


def test_managed_async_and_pool_allocations(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc, held = _hold(
        audit, cudaprobe, driver, ["managed:1000", "async:20000", "pool:300000"]
    )
    assert held == {0: 321000}
    assert _release(audit, proc) == {0: 0}
    kinds = [e.kind for e in audit.poll_events() if e.pid == proc.pid]
    for kind in ("mem_alloc_managed", "mem_alloc_async", "mem_alloc_pool"):
        assert kinds.count(kind) == 1
    assert kinds.count("mem_free_async") == 2 and kinds.count("mem_free") == 1
