"""When the ring buffer is full, events are dropped, never the ledger: each drop is counted in
the kernel, so events received + events lost == events emitted, exactly."""

from __future__ import annotations

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

from bpf.audit import AuditProbe

pytestmark = pytest.mark.bpf

PAIRS = 3000


def test_received_plus_lost_is_every_event(cudaprobe: CudaProbe, driver: Driver) -> None:
    # One page of ring buffer holds 4096 / (8 + 56) = 64 events; nobody reads during the run.
    with AuditProbe(libs=[driver.lib], ringbuf_pages=1) as probe:
        result = cudaprobe.run("init", "primary:0", f"loop:{PAIRS}:100", env=driver.env)
        assert result.returncode == 0
        received = [e for e in probe.poll_events()]
        emitted = 1 + 2 * PAIRS + 1  # primary_retain, alloc + free per pair, proc_clear
        mine = [e for e in received if e.pid == result.pid]
        assert len(mine) == len(received)  # only this process used this library file
        lost = probe.lost_events()
        assert lost > 0
        assert len(received) + lost == emitted
        assert probe.errors()["lost_event"] == lost
        assert probe.health()["lost_events"] == lost
        assert result.pid not in probe.snapshot()
