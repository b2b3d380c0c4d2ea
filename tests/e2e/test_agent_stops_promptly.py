"""Ctrl-C (or SIGTERM) stops the agent within about a second, and it says so: the eBPF probes'
teardown, seconds in the kernel, is left to a child process instead of being waited for."""

from __future__ import annotations

import signal
import time

import pytest
from agent_harness import AgentProc

pytestmark = [pytest.mark.bpf]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_agent_with_ebpf_stops_at_once_and_says_so(start_agent, sig: signal.Signals) -> None:
    agent: AgentProc = start_agent()
    assert "ebpf on" in agent.stderr()
    assert agent.proc is not None
    t0 = time.monotonic()
    agent.proc.send_signal(sig)
    agent.proc.wait(30)
    took = time.monotonic() - t0
    assert agent.proc.returncode == 0
    assert took < 5.0, took  # it took 7.7 s when the agent waited for the teardown
    assert f"gpuwarden agent: {sig.name}: stopping" in agent.stderr()
