"""GPUWARDEN_GATE_WAIT=yield: a launch waiting for its turn or its pace stays runnable and
yields the CPU instead of sleeping, so that on a node whose cores are all busy the kernel's
scheduler keeps treating the launching thread as a whole task (docs/compute.md, known limits:
H200 with 16 cores spinning, 70 % paced alone 59.2-61.8 % asleep, 67.0-73.5 % yielding).  The
shares are those of sleeping waits; what changes is that the waits use the CPU
(test_gate_wait_follows_the_launching_thread_s_cpu_wait.py measures that, for one container)."""

from __future__ import annotations

import pytest
from rounds import assert_held_to_limits, limit_shares


@pytest.mark.slow
def test_two_containers_waiting_by_yielding_take_their_turns_at_30_and_70(
        loop, make_sim_gpu, tmp_path) -> None:
    # judged by the medians of three runs (rounds.py)
    runs = limit_shares(loop, make_sim_gpu, (30, 70), "kernel", 500, 3.0, tmp=tmp_path,
                        GPUWARDEN_GATE_WAIT="yield")
    assert_held_to_limits(runs, (30, 70))
