"""In-kernel enforcement: a process with a kill limit is SIGKILLed from the entry probe of the
allocation that would take it over the limit, so that call never returns to it; the event
says so.  Processes without a limit, and the limit's own process below it, are untouched."""

from __future__ import annotations

import signal

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

pytestmark = pytest.mark.bpf


def test_crossing_allocation_never_returns(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc = cudaprobe.start("init", "primary:0", "alloc:1000", "wait",
                           "alloc:5000", "alloc:100000", "alloc:1", env=driver.env)  # fmt: skip
    bystander = cudaprobe.start("init", "primary:0", "alloc:1000000", "wait", env=driver.env)
    try:
        proc.wait_for()
        bystander.wait_for()
        audit.set_kill_limit(proc.pid, 10_000)
        proc.resume()
        result = proc.finish()
    finally:
        bystander.resume()
        bystander.finish()
    assert result.returncode == -signal.SIGKILL
    allocs = result.of("alloc")
    assert [a["bytes"] for a in allocs] == ["1000", "5000"]  # the 100000 one never returned
    events = [e for e in audit.poll_events(timeout_ms=50) if e.pid == proc.pid]
    killed = [e for e in events if e.killed]
    assert len(killed) == 1
    assert (killed[0].kind, killed[0].bytes, killed[0].device) == ("mem_alloc", 100000, 0)
    assert events[-1].kind == "proc_clear" and events[-1].bytes == 6000
    assert bystander.result().returncode == 0
    assert audit.errors()["kill_failed"] == 0


def test_limit_is_cleared_with_its_process(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc = cudaprobe.start("init", "wait", env=driver.env)
    proc.wait_for()
    audit.set_kill_limit(proc.pid, 1)
    assert audit.health()["kill_limits"] >= 1
    proc.resume()
    proc.finish()
    keys = [k.value for k in audit._bpf[b"kill_limits"]]
    assert proc.pid not in keys  # a later process reusing the pid starts without a limit


def test_clear_kill_limit_lifts_enforcement(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc = cudaprobe.start("init", "primary:0", "wait", "alloc:5000", "wait", env=driver.env)
    proc.wait_for()
    audit.set_kill_limit(proc.pid, 100)
    audit.clear_kill_limit(proc.pid)
    audit.clear_kill_limit(proc.pid)  # clearing twice is fine
    proc.resume()
    proc.wait_for()
    assert audit.snapshot()[proc.pid] == {0: 5000}
    proc.resume()
    assert proc.finish().returncode == 0


@pytest.mark.parametrize(
    ("pid", "limit"), [(0, 10), (-5, 10), (True, 10), (123, -1), (123, 1.5), (123, "1GiB")]
)
def test_bad_limit_arguments_are_refused(audit, pid: object, limit: object) -> None:
    with pytest.raises(ValueError, match=r"pid|kill limit"):
        audit.set_kill_limit(pid, limit)
