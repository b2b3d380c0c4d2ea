"""A process's slot that the shim releases (libvgpu's atexit handler) while the process still
runs: the totals fall at once, so the slots are read at once (not at the next 2 s slot read),
and the process is reported leaving (Workload.shim_leaving) until it exits or EXIT_GRACE has
passed; a process that registers again is no longer leaving."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.ledger import WorkloadRecord
from agent.model import Pid, Rule, WorkloadKey
from agent.procfs import start_time
from agent.proctree import ProcessTable
from agent.workloads import EXIT_GRACE, SLOTS_PERIOD, Regions, Tracked
from libvgpu import region as lr

UUID = "GPU-00000000-0000-0000-0000-0000000000aa"
MiB = 1 << 20


def slot(path: Path, pid: int, used: int) -> None:
    """Claim slot 0 for `pid` counting `used` bytes, or (`used` 0) release it as libvgpu's
    vgpu_region_release_slot does: the bytes leave the device's total, the slot is freed."""
    with lr.Region.open(path) as r:
        s = lr.RegionStruct.from_buffer(r._mm)  # test-only poke at the mapping
        p, d = s.procs[0], s.devices[0]
        if used:
            p.pid, p.start_time, p.used_bytes[0], p.state = (pid, start_time(pid) or 0, used,
                                                             lr.PROC_ACTIVE)
            d.used_bytes = used
        else:
            d.used_bytes, p.used_bytes[0], p.pid, p.start_time, p.state = 0, 0, 0, 0, lr.PROC_FREE
        del s, p, d


def test_a_released_slot_is_read_at_once_and_its_process_is_leaving_for_a_grace(
        tmp_path: Path) -> None:
    path = tmp_path / "w.region"
    lr.Region.create(path, [(UUID, 1 << 30)]).close()
    me = Pid(os.getpid())  # a live process of the workload, as the table attributes it
    table = ProcessTable()
    table.attach(me, "w", start_time(me))
    events: list[dict[str, Any]] = []
    proc = tmp_path / "proc"  # where the agent reads its maps: it runs the shim
    (proc / str(me)).mkdir(parents=True)
    (proc / str(me) / "maps").write_text(
        "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /usr/local/gpuwarden/lib/libvgpu.so\n")
    regions = Regions(events.append, lambda: 0.0, str(proc))
    t = Tracked(WorkloadRecord(wid="w", namespace="ns", name="w", region=str(path)),
                WorkloadKey("ns", "w"), Rule(name="r"))
    regions.open(t)

    def at(now: float) -> Any:
        return regions.workload(t, now, table, (), None)

    slot(path, me, 256 * MiB)
    w = at(100.0)
    assert w.shim_pids == {me} and w.shim_leaving == frozenset()
    assert w.shim_used == {UUID: 256 * MiB}

    slot(path, me, 0)  # atexit: the slot goes; the process and its memory are still there
    w = at(100.5)  # long before the next periodic slot read (100 + SLOTS_PERIOD)
    assert SLOTS_PERIOD > 0.5
    assert w.shim_used == {UUID: 0} and w.shim_pids == frozenset()
    assert w.shim_leaving == {me}
    assert at(100.5 + EXIT_GRACE - 0.1).shim_leaving == {me}
    assert at(100.5 + EXIT_GRACE).shim_leaving == frozenset(), "past the grace: a bypass again"
    assert events == []

    slot(path, me, 64 * MiB)  # registered again (e.g. it re-initialised CUDA): not leaving
    assert at(200.0).shim_leaving == frozenset() and t.left == {}
    slot(path, me, 0)
    assert at(200.1).shim_leaving == {me}
    table.on_exit(me)  # its exit: nothing to remember
    w = at(200.2)
    assert w.shim_leaving == frozenset() and t.left == {}
    regions.close(t)
