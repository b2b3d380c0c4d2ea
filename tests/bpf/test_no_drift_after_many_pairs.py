"""100,000 alloc/free pairs from a C loop leave the ledger exactly where it started: no bytes,
no pointer rows left behind, no error counted but (possibly) lost events, which do not touch
the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from bpf_harness import Driver, Ops

pytestmark = [pytest.mark.bpf, pytest.mark.slow]

PAIRS = 100_000


def test_hundred_thousand_pairs_leave_no_drift(audit, cuda_ops: Path, driver: Driver) -> None:
    before = {k: v for k, v in audit.errors().items() if k != "lost_event"}
    proc = Ops(cuda_ops, driver, ["init", "primary", "0", "alloc", "4096",
                                  "loop", str(PAIRS), "1048576", "wait"])  # fmt: skip
    try:
        proc.wait_for()
        loop = proc.result().returned("loop")[0]
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
