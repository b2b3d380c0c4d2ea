"""100,000 alloc/free pairs from a C loop leave the ledger exactly where it started: no bytes,
no pointer rows left behind, no error counted but (possibly) lost events, which do not touch
the ledger."""

from __future__ import annotations

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

pytestmark = [pytest.mark.bpf, pytest.mark.slow]

PAIRS = 100_000


def test_hundred_thousand_pairs_leave_no_drift(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    before = {k: v for k, v in audit.errors().items() if k != "lost_event"}
    proc = cudaprobe.start("init", "primary:0", "alloc:4096",
                           f"loop:{PAIRS}:1048576", "wait", env=driver.env)  # fmt: skip
    try:
        proc.wait_for()
        loop = proc.result().of("loop")[0]
        assert (loop["rc"], loop["pairs"]) == ("0", str(PAIRS))
        assert audit.snapshot()[proc.pid] == {0: 4096}  # only the allocation still held
        rows = [k for k in audit._bpf[b"ptrs"] if k.pid == proc.pid]
        assert len(rows) == 1
    finally:
        proc.resume()
        proc.finish()
    after = {k: v for k, v in audit.errors().items() if k != "lost_event"}
    assert after == before
    assert proc.pid not in audit.snapshot()
    audit.poll_events()
