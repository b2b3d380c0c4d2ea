"""AuditProbe.fileno() is a descriptor a caller can wait on: quiet while nothing happens,
readable once a process allocates through the probed library (the agent sleeps on it)."""

from __future__ import annotations

import select

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

from bpf.audit import AuditProbe

pytestmark = pytest.mark.bpf


def test_fd_turns_readable_on_events(cudaprobe: CudaProbe, driver: Driver) -> None:
    with AuditProbe(libs=[driver.lib], launch_counters=False) as probe:
        fd = probe.fileno()
        probe.poll_events()
        assert select.select([fd], [], [], 0.2)[0] == []
        result = cudaprobe.run("init", "primary:0", f"alloc:{1 << 20}", env=driver.env)
        assert result.returncode == 0
        assert select.select([fd], [], [], 5.0)[0] == [fd]
        assert any(e.pid == result.pid for e in probe.poll_events())


def test_fileno_before_start_is_a_clear_error(driver: Driver) -> None:
    probe = AuditProbe(libs=[driver.lib])
    with pytest.raises(RuntimeError, match="not started"):
        probe.fileno()
