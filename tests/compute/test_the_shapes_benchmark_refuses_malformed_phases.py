"""The shapes benchmark's worker takes its phases as LIMIT:SECONDS[:WARM],... and refuses a
malformed one by name, saying what is valid (tests/benchmarks/bench_compute_shapes.py,
parse_phases)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_compute_shapes as bench


def test_phases_give_limit_seconds_and_their_own_warm_up() -> None:
    assert bench.parse_phases("-1:2,-2:1.5,30:0.1:0,0:4") == [
        (-1, 2.0, None), (-2, 1.5, None), (30, 0.1, 0.0), (0, 4.0, None)]


@pytest.mark.parametrize("bad", ["30", "30:2:0.5:1", "x:2", "30:y", "100:2", "-3:2", "30:0",
                                 "30:2:-1", "30:2,"])
def test_a_malformed_phase_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match=r"--phases .*LIMIT:SECONDS\[:WARM\]") as e:
        bench.parse_phases(bad)
    assert f"phase {bad.split(',')[-1]!r}" in str(e.value)  # the one phase at fault, named


@pytest.mark.parametrize("option", ["--shapes", "--pairs", "--services", "--newcomer-shapes"])
@pytest.mark.parametrize("bad", ["99", "-1", "x", "0,x"])
def test_a_bad_row_index_is_refused_by_name(option: str, bad: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Every option that picks rows by index refuses one out of range or not a number before
    anything runs, naming the option, its value and each option's valid range."""
    with pytest.raises(SystemExit) as e:
        bench.main(["--only", "newcomer", option, bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} {bad!r}" in err, err
    assert f"0..{len(bench.NEWCOMER) - 1}, comma separated" in err, err
