"""cuMemAlloc-like calls carry no device: the audit gives them the device of the calling
thread's current context, tracked in the kernel from context create / primary retain and
set / push / pop.  Without a known context the device is -1 (unknown)."""

from __future__ import annotations

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

pytestmark = pytest.mark.bpf


def _snapshot_after(audit, cudaprobe: CudaProbe, driver: Driver, ops: list[str]) -> dict[int, int]:
    proc = cudaprobe.start("init", *ops, "wait", env=driver.env)
    try:
        proc.wait_for()
        return audit.snapshot().get(proc.pid, {})
    finally:
        proc.resume()
        proc.finish()


def test_created_context_sets_the_device(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    assert _snapshot_after(audit, cudaprobe, driver, ["ctx:2", "alloc:10"]) == {2: 10}


def test_primary_context_made_current(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    snap = _snapshot_after(
        audit, cudaprobe, driver, ["primary:1", "alloc:10", "primary:0", "alloc:20"]
    )
    assert snap == {1: 10, 0: 20}


def test_push_and_pop_follow_the_stack(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    # ctx 3 is created (pushed) over the primary context of device 1; pushing it again then
    # popping leaves it current; popping once more uncovers device 1's.
    ops = ["primary:1", "ctx:3", "push", "pop", "alloc:7", "pop", "alloc:11"]
    assert _snapshot_after(audit, cudaprobe, driver, ops) == {3: 7, 1: 11}


# The simulator (like NVIDIA's driver) refuses allocations without a current context; the
# fake driver does not, which is how a process's calls look when the audit missed its
# context calls (attached later).


def test_destroyed_context_is_forgotten(audit, cudaprobe: CudaProbe, fake_driver: Driver) -> None:
    ops = ["ctx:1", "destroy", "alloc:5"]
    assert _snapshot_after(audit, cudaprobe, fake_driver, ops) == {-1: 5}


def test_no_context_means_unknown_device(audit, cudaprobe: CudaProbe, fake_driver: Driver) -> None:
    assert _snapshot_after(audit, cudaprobe, fake_driver, ["alloc:99"]) == {-1: 99}
