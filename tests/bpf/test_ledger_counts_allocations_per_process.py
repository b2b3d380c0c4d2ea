"""Allocations and frees from several C processes at once land in the in-kernel ledger exactly,
per process and per device, and launches are counted per process."""

from __future__ import annotations

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe, Running

pytestmark = pytest.mark.bpf


def _live_bytes(ops: Running) -> int:
    """What the process holds by its own account: allocations minus the ones it freed."""
    sizes = [int(f["bytes"]) for f in ops.result().of("alloc")]
    freed = len(ops.result().of("free"))
    return sum(sizes[: len(sizes) - freed])  # `free` releases the most recent allocation


def test_three_processes_are_counted_apart(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    scripts = [
        ["init", "primary:0", "alloc:1048576", "alloc:4096", "launch:7:1", "wait"],
        ["init", "primary:0", "alloc:3000000", "alloc:5", "free", "launch:2:1", "wait"],
        ["init", "ctx:1", "alloc:777", "alloc:123456", "alloc:1", "free", "wait"],
    ]
    procs = [cudaprobe.start(*s, env=driver.env) for s in scripts]
    try:
        for p in procs:
            p.wait_for()
        snap = audit.snapshot()
        launches = audit.launch_counts()
        assert snap[procs[0].pid] == {0: _live_bytes(procs[0])}
        assert snap[procs[1].pid] == {0: _live_bytes(procs[1])}
        assert snap[procs[2].pid] == {1: _live_bytes(procs[2])}
        assert launches.get(procs[0].pid) == 7
        assert launches.get(procs[1].pid) == 2
        assert procs[2].pid not in launches
    finally:
        for p in procs:
            p.resume()
            p.finish()
    assert all(p.result().returncode == 0 for p in procs)


def test_events_match_the_calls(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    ops = cudaprobe.start("init", "primary:0", "alloc:65536", "free", "wait", env=driver.env)
    ops.wait_for()
    ops.resume()
    ops.finish()
    events = [e for e in audit.poll_events(timeout_ms=100) if e.pid == ops.pid]
    kinds = [e.kind for e in events]
    assert kinds == ["primary_retain", "mem_alloc", "mem_free", "proc_clear"]
    alloc, free = events[1], events[2]
    ptr = int(ops.result().of("alloc")[0]["ptr"], 16)
    assert (alloc.bytes, alloc.ptr, alloc.device) == (65536, ptr, 0)
    assert (free.bytes, free.ptr, free.device) == (65536, ptr, 0)
    assert events[3].bytes == 0  # nothing left at exit
    assert not any(e.killed for e in events)
    assert alloc.ts_ns < free.ts_ns
