"""The workload program's settings (launch_loop.c: its microseconds, env_us, and its loading
kernel's grid): a bad value is named and the program exits 2 before it launches anything, rather
than running a scenario other than the one a test asked for."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name", ["LAUNCH_LOOP_DELAY_US", "LAUNCH_LOOP_BURST_US",
                                  "LAUNCH_LOOP_GAP_US", "LAUNCH_LOOP_IDLE_US"])
@pytest.mark.parametrize("value", ["abc", "-1", "12ms", "", "3600000001"])
def test_a_bad_microsecond_setting_is_named_and_refused(loop, sim_gpu, name: str,
                                                        value: str) -> None:
    proc = loop.start(sim_gpu.env, "kernel", 10, 0.1, **{name: value})
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, (out, err)
    assert f"{name}={value}: give the microseconds" in err, err
    assert "0 to 3600000000" in err, err


def test_zero_microseconds_are_accepted(loop, sim_gpu) -> None:
    got = loop.run(sim_gpu.env, "kernel", 10, 0.2, LAUNCH_LOOP_DELAY_US="0",
                   LAUNCH_LOOP_BURST_US="0", LAUNCH_LOOP_GAP_US="0",
                   LAUNCH_LOOP_IDLE_US="0")
    assert float(got["launches"]) > 0, got


@pytest.mark.parametrize("value", ["abc", "0", "-1", "", "4294967296"])
def test_a_bad_loading_grid_is_named_and_refused(loop, sim_gpu, value: str) -> None:
    proc = loop.start(sim_gpu.env, "kernel", 10, 0.1, LAUNCH_LOOP_DELAY_US="0",
                      LAUNCH_LOOP_DELAY_GRID=value)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, (out, err)
    assert f"LAUNCH_LOOP_DELAY_GRID={value}: give the loading kernel's grid" in err, err


def test_a_loading_grid_other_than_the_loop_s_runs(loop, sim_gpu) -> None:
    got = loop.run(sim_gpu.env, "kernel", 10, 0.2, LAUNCH_LOOP_DELAY_US="1000",
                   LAUNCH_LOOP_DELAY_GRID="1")
    assert float(got["launches"]) > 0, got
