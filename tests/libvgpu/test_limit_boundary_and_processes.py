"""The limit is exact at the boundary, holds across 8 processes racing on one region, frees what a
SIGKILLed process held, follows a limit changed at run time through libvgpu/region.py, and counts
each process's context overhead as measured (not a constant)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

import pytest
from cudaprobe import OOM, GiB, MiB

from libvgpu.region import Region


def free_now(run) -> int:
    rows, _ = run.run("dlsym", "info")
    return int(rows[0]["free"])


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_boundary_is_exact(shim, delta: int) -> None:
    run = shim("1g")
    room = free_now(run)  # limit minus this process's context
    rows, _ = run.run("dlsym", f"alloc:{room + delta}", "alloc:1", "info")
    if delta > 0:
        assert rows[0]["rc"] == str(OOM)
        assert rows[1]["rc"] == "0"
    elif delta == 0:
        assert rows[0]["rc"] == "0"
        assert rows[1]["rc"] == str(OOM)
        assert rows[2]["free"] == "0"
    else:
        assert rows[0]["rc"] == "0"
        assert rows[1]["rc"] == "0"  # the very last byte
        assert rows[2]["free"] == "0"


def test_context_overhead_is_measured(shim) -> None:
    run = shim("1g", GPUWARDEN_SIM_CTX_OVERHEAD=str(123 * MiB))
    # the sim reads its overhead when it creates its state: fresh state for this test
    assert free_now(run) == GiB - 123 * MiB


def test_context_is_counted_from_another_pid_namespace(shim) -> None:
    """In a container's PID namespace NVML lists host pids, never getpid(): the process is the
    one that appeared on the GPU while it created its context, other processes there already."""
    ctx = 123 * MiB
    run = shim("4g", GPUWARDEN_SIM_CTX_OVERHEAD=str(ctx), GPUWARDEN_SIM_NVML_PID_OFFSET="1000000")
    with _crowd(run, 3):
        assert free_now(run) == 4 * GiB - 4 * ctx


def test_context_is_measured_with_more_gpu_processes_than_a_first_nvml_buffer(shim) -> None:
    """NVML's process list is read with a buffer sized to what NVML says it needs: with 70
    other processes on the GPU, the newcomer's context is still found and counted."""
    ctx = 8 * MiB
    run = shim("60g", GPUWARDEN_SIM_CTX_OVERHEAD=str(ctx))
    with _crowd(run, 70):
        assert free_now(run) == 60 * GiB - 71 * ctx


@contextlib.contextmanager
def _crowd(run, n: int) -> Iterator[None]:
    """n other processes holding a context on the GPU while the block runs."""
    crowd = []
    try:
        for _ in range(n):
            crowd.append(_hold(run, "info")[0])
        yield
    finally:
        for p in crowd:
            p.kill()


def _hold(run, *ops: str):
    """A process that ran `ops` and now waits, holding what it allocated; its rows."""
    p = run.spawn("dlsym", *ops, "wait")
    return p, p.wait_for()


def test_eight_racing_processes_never_pass_the_limit(shim) -> None:
    limit = 4 * GiB
    chunk = 7 * MiB
    run = shim(str(limit))
    procs = [run.spawn("dlsym", f"fill:{chunk}", "wait") for _ in range(8)]
    counts = []
    refused_contexts = 0
    for p in procs:
        _init, ctx, fill, _wait = p.wait_for()
        if ctx["rc"] != "0":  # its context did not fit any more: refused, as OOM
            assert ctx["rc"] == str(OOM) and fill["count"] == "0", (ctx, fill)
            refused_contexts += 1
            continue
        counts.append(int(fill["count"]))
    with Region.open(run.region_path) as region:
        dev = region.snapshot().devices[0]
    for p in procs:
        p.finish(timeout=30)
    contexts = sum(pu.context_bytes for pu in dev.processes)
    assert contexts == (8 - refused_contexts) * 300 * MiB
    admitted = sum(counts) * chunk
    assert dev.used_bytes == admitted + contexts
    assert dev.used_bytes <= limit
    assert limit - dev.used_bytes < chunk  # and the slice was really used up
    assert len(dev.processes) == 8 - refused_contexts
    assert all(pu.alive for pu in dev.processes)


def test_sigkilled_process_is_reclaimed_by_the_next_one(shim) -> None:
    run = shim("2g")
    p, _ = _hold(run, "alloc:1000000000")
    with Region.open(run.region_path) as region:
        assert region.snapshot().devices[0].used_bytes == 1_000_000_000 + 300 * MiB
        os.kill(p.pid, signal.SIGKILL)
        p.kill()  # reaps it
        room = free_now(run)  # the next process reclaims the dead one's usage
        assert room == 2 * GiB - 300 * MiB
        snap = region.snapshot().devices[0]
        assert [pu.pid for pu in snap.processes] == []  # the probe above exited cleanly
        assert snap.used_bytes == 0


def test_sigkilled_process_is_reclaimed_by_the_agent(shim) -> None:
    run = shim("2g")
    p, _ = _hold(run, "alloc:500000000")
    os.kill(p.pid, signal.SIGKILL)
    p.kill()  # reaps it
    with Region.open(run.region_path) as region:
        before = region.snapshot().devices[0]
        assert [pu.alive for pu in before.processes] == [False]
        assert region.reclaim_dead() == 1
        assert region.snapshot().devices[0].used_bytes == 0


def test_limit_changed_at_run_time(shim) -> None:
    run = shim("1g")
    with run.spawn("dlsym", "stdin") as p:
        p.wait_for("primary:0")
        assert p.send("alloc:500000000")["rc"] == "0"
        # 300 MiB context + 2 x 500 MB > 1 GiB
        assert p.send("alloc:500000000")["rc"] == str(OOM)
        with Region.open(run.region_path) as region:
            region.set_memory_limit(0, 2 * GiB)
            assert p.send("alloc:500000000")["rc"] == "0"
            assert p.send("info")["total"] == str(2 * GiB)
            region.set_memory_limit(region.snapshot().devices[0].uuid, 1 * GiB)
            assert p.send("alloc:1")["rc"] == str(OOM)  # over the new limit: nothing more
            info = p.send("info")
            assert (info["total"], info["free"]) == (str(GiB), "0")
            region.set_memory_limit(0, None)  # no limit: the real device
            assert p.send("alloc:1000000000")["rc"] == "0"
        assert p.finish(timeout=30).returncode == 0


def test_process_is_listed_in_the_region_before_its_context_exists(shim) -> None:
    """The shim claims the process's slot before it asks the driver for a context, so the agent
    never sees a shim process on the GPU (NVML lists it while the context is being made, which
    takes 100 ms and more on a real GPU) without the shim's slot: no false bypass verdict."""
    from agent.regions import RegionReader

    run = shim("1g", GPUWARDEN_SIM_CTX_CREATE_MS="1500")
    p = run.spawn("dlsym", "info", "wait")
    try:
        deadline = time.monotonic() + 1.0  # well inside the 1.5 s the context takes
        listed = False
        while time.monotonic() < deadline and not listed:
            if run.region_path.exists() and run.region_path.stat().st_size > 0:
                try:
                    listed = p.pid in RegionReader(run.region_path).read().procs
                except Exception:  # the region is being created
                    listed = False
            time.sleep(0.02)
        assert listed, "the process had no region slot while its context was being created"
    finally:
        p.kill()
