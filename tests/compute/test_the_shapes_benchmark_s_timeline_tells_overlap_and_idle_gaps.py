"""The shapes benchmark's timeline measures (tests/benchmarks/bench_compute_shapes.py), pure
functions over step windows: how long two containers' kernels were in flight at once, and what
the GPU's idle gaps lay between (a process's own steps, a container's two processes, the two
containers).  Issue 18's split-window findings rest on these numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_compute_shapes as bench


def test_overlap_counts_only_time_both_sides_are_in_flight() -> None:
    a = [[(0.0, 2.0)], [(1.0, 3.0)]]  # one side's two processes overlap each other: once
    b = [[(2.5, 4.0)]]
    assert bench.at_once_pct(a, b, 0.0, 10.0) == pytest.approx(5.0)


def test_idle_gaps_are_told_apart_by_what_they_lie_between() -> None:
    a = [[(0.0, 1.0), (1.2, 2.0)],  # 0.2 between one process's own steps
         [(2.4, 3.0)]]               # 0.4 from its sibling's step to this one
    b = [[(3.8, 5.0)]]               # 0.8 from the other side's step
    assert bench.idle_pct(a, b, 0.0, 5.0) == {"process": 4.0, "sibling": 8.0, "other": 16.0}


def test_a_gap_belongs_to_the_step_that_ended_last() -> None:
    # b's short step ends inside a's long one: the gap after is a's own
    a = [[(0.0, 2.0), (2.5, 3.0)]]
    b = [[(0.5, 1.0)]]
    assert bench.idle_pct(a, b, 0.0, 5.0) == {"process": 10.0, "sibling": 0.0, "other": 0.0}


def test_gaps_at_the_phase_s_edges_are_left_out() -> None:
    a = [[(1.0, 2.0)]]
    b = [[(2.0, 3.0)]]
    assert bench.idle_pct(a, b, 0.0, 10.0) == {"process": 0.0, "sibling": 0.0, "other": 0.0}


def test_slices_tell_steps_flight_and_the_gate_s_time_per_slice() -> None:
    windows = [[(0.00, 0.03), (0.05, 0.08), (0.12, 0.15)]]  # steps end at 30, 80, 150 ms
    # (time, charged ns, waited ns, launches, turns, scale, effective %)
    states = [(0.0, 0, 0, 0, 0, 1.0, 30), (0.1, 20_000_000, 50_000_000, 2, 1, 1.0, 30),
              (0.2, 30_000_000, 60_000_000, 3, 1, 1.0, 30)]
    first, second = bench.timeline_slices(windows, states, 0.0, 0.1, 2)
    assert (first["steps"], first["step_ms"], first["in_flight_pct"]) == (2, 30.0, 60.0)
    assert (first["charged_pct"], first["waited_pct"], first["turns_pct"]) == (20.0, 50.0, 50)
    assert (second["steps"], second["step_ms"], second["in_flight_pct"]) == (1, 30.0, 30.0)
    assert (second["charged_pct"], second["waited_pct"], second["turns_pct"]) == (10.0, 10.0, 100)


def test_a_slice_no_two_samples_bound_says_nothing_of_the_gate() -> None:
    (only,) = bench.timeline_slices([], [(0.05, 0, 0, 0, 0, 1.0, 30)], 0.0, 0.1, 1)
    assert only["steps"] == 0 and only["step_ms"] is None
    assert only["charged_pct"] is None and only["waited_pct"] is None


def test_stamped_log_lines_are_timed_from_the_first_step_and_cut_after_it() -> None:
    lines = ["device 0: turns: window 48 ms at 112 ms of 160 ms (longest kernel 0 us, its "
             "neighbours') [monotonic 1000.400 s]",
             "device 0: no turns [monotonic 1001.900 s]",  # past the second after t0: left out
             "device 0: turns: window 12 ms at 28 ms of 40 ms"]  # an older library: as it is
    assert bench.stamped_since(lines, 1000.5, 1.0) == [
        "-0.100 s: device 0: turns: window 48 ms at 112 ms of 160 ms (longest kernel 0 us, its "
        "neighbours')", "device 0: turns: window 12 ms at 28 ms of 40 ms"]
