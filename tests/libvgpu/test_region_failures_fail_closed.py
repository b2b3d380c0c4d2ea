"""The shared region's failure modes never turn into "no limit" or a hang:

- a full or garbage device table refuses device memory (fail closed) instead of letting the
  process allocate the whole GPU;
- a region file left unformatted by a creator killed half-way is recovered by the next process;
- a process that holds the region's file lock forever (stopped, say) delays no other process more
  than a bounded time, and the agent's reclaim never waits on it;
- a zombie (killed, not yet reaped by its parent) counts as dead: its memory goes back to the
  slice."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cudaprobe import OOM, GiB, MiB, Row
from testbed import wait_for

from libvgpu.region import REGION_BYTES, Region, RegionStruct, proc_alive, proc_start_time

CTX = 300 * MiB  # the simulated GPU's context overhead


def _run(run, *ops: str, timeout: float = 20) -> tuple[list[Row], str, float]:
    """The rows of `ops` (led by one named "ctx" when the context was refused), stderr and the
    time the run took."""
    t0 = time.monotonic()
    res = run.result("dlsym", *ops, timeout=timeout)
    took = time.monotonic() - t0
    _init, ctx, *rows = res.rows
    refused = [{**ctx, "op": "ctx"}] if ctx["rc"] != "0" else []
    return [*refused, *rows], res.stderr, took


def _codes(rows: list[Row]) -> list[tuple[str, str]]:
    """[(operation, rc)]"""
    return [(r["op"].split(":")[0], r["rc"]) for r in rows]


def _rewrite(path: Path, edit) -> None:
    """Edit the region file's struct in place through a private copy (no map kept open)."""
    raw = bytearray(path.read_bytes())
    r = RegionStruct.from_buffer(raw)
    edit(r)
    del r
    path.write_bytes(bytes(raw))


def _fake_uuid(i: int) -> str:
    return f"GPU-{i:08x}-0000-0000-0000-000000000000"


# ---- a full or garbage device table ----------------------------------------------------------


def test_full_device_table_refuses_memory_instead_of_no_limit(shim) -> None:
    run = shim("1g")
    Region.create(run.region_path, [(_fake_uuid(i), GiB) for i in range(16)]).close()
    rows, err, _ = _run(run, "alloc:2147483648", "alloc:1048576")
    assert not [r for r in rows if r["op"].startswith("alloc") and r["rc"] == "0"], rows
    assert rows[0]["rc"] == str(OOM)
    assert "no free device entry" in err and "admits no device memory" in err


def test_garbage_device_entries_are_taken_back_and_the_limit_holds(shim) -> None:
    run = shim("1g")
    Region.create(run.region_path, []).close()

    def garble(r: RegionStruct) -> None:
        for d in r.devices:
            d.state = 0xDEADBEEF
            d.limit_bytes = 2**64 - 1

    _rewrite(run.region_path, garble)
    rows, err, _ = _run(run, "alloc:2147483648", f"alloc:{100 * MiB}", "info")
    assert _codes(rows) == [("alloc", str(OOM)), ("alloc", "0"), ("info", "0")], (rows, err)
    assert rows[2]["total"] == str(GiB)


# ---- creation interrupted --------------------------------------------------------------------


def test_region_left_unformatted_by_a_killed_creator_is_recovered(shim) -> None:
    """What a creator killed between sizing the file and writing its header leaves behind."""
    run = shim("1g")
    run.region_path.write_bytes(bytes(REGION_BYTES))
    rows, err, _ = _run(run, f"alloc:{100 * MiB}", "info")
    assert _codes(rows) == [("alloc", "0"), ("info", "0")], err
    assert rows[1]["total"] == str(GiB)
    with Region.open(run.region_path) as region:  # a valid region again, for the agent too
        assert region.snapshot().devices[0].limit_bytes == GiB


def test_kills_during_region_creation_never_leave_it_unusable(shim) -> None:
    rng = random.Random(15)
    run = shim("1g")
    _run(run, "info")  # the simulated GPU's own state file exists before the kills begin
    for i in range(40):
        path = run.region_path.with_name(f"killed-{i}")
        run.env["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = str(path)
        p = subprocess.Popen(run.probe.argv(*run.script("info")), env=run.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 0.004))  # the kill's moment is the experiment's variable
        p.kill()
        p.wait()
        rows, err, _ = _run(run, f"alloc:{100 * MiB}")
        assert _codes(rows) == [("alloc", "0")], (i, err)


# ---- a lock held forever ---------------------------------------------------------------------


@contextmanager
def _lock_held(path: Path) -> Iterator[None]:
    """The region's file lock held by someone else (as by a process stopped inside it)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_a_held_region_lock_does_not_block_a_new_process(shim) -> None:
    run = shim("1g")
    _run(run, "info")  # the region exists, its device registered
    with _lock_held(run.region_path):
        rows, err, took = _run(run, f"alloc:{100 * MiB}", "info")
    assert _codes(rows) == [("alloc", "0"), ("info", "0")], err
    assert took < 5, f"the new process waited {took:.1f} s on a lock it did not need"


def test_a_held_lock_when_a_device_must_be_added_fails_closed_in_bounded_time(shim) -> None:
    run = shim("1g")
    Region.create(run.region_path, []).close()  # no device entry yet: adding one needs the lock
    with _lock_held(run.region_path):
        rows, err, took = _run(run, f"alloc:{100 * MiB}")
    assert took < 8, f"waited {took:.1f} s"
    assert not [r for r in rows if r["op"].startswith("alloc") and r["rc"] == "0"], rows
    assert "lock" in err and str(run.region_path) in err


def test_agent_reclaim_does_not_wait_on_a_held_region_lock(shim) -> None:
    run = shim("1g")
    _run(run, "info")
    with Region.open(run.region_path) as region, _lock_held(run.region_path):
        t0 = time.monotonic()
        region.reclaim_dead()
        assert time.monotonic() - t0 < 2


# ---- zombies ---------------------------------------------------------------------------------


def _proc_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (after the command's closing parenthesis)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


@contextmanager
def _zombie(run, nbytes: int) -> Iterator[tuple[int, int]]:
    """(pid, start time) of a process that allocated nbytes, was SIGKILLed and is not reaped
    yet (its parent, this test, waits only when the block ends)."""
    p = run.spawn("dlsym", f"alloc:{nbytes}", "wait")
    try:
        assert p.wait_for()[2]["rc"] == "0"
        start = proc_start_time(p.pid)
        assert proc_alive(p.pid, start)
        os.kill(p.pid, signal.SIGKILL)
        wait_for(lambda: _proc_state(p.pid) in "ZX", 10, f"pid {p.pid} a zombie after SIGKILL",
                 interval=0.005)
        yield p.pid, start
    finally:
        p.kill()  # reaps it


def test_a_zombies_memory_goes_back_to_the_slice(shim) -> None:
    run = shim("1g")
    with _zombie(run, 700 * MiB):
        rows, err, _ = _run(run, "info")
        assert _codes(rows) == [("info", "0")], err
        assert rows[0]["free"] == str(GiB - CTX)


def test_the_agent_counts_a_zombie_as_dead(shim) -> None:
    run = shim("1g")
    with _zombie(run, 100 * MiB) as (pid, start):
        assert not proc_alive(pid, start)
        with Region.open(run.region_path) as region:
            assert region.reclaim_dead() == 1
            assert region.snapshot().devices[0].used_bytes == 0
