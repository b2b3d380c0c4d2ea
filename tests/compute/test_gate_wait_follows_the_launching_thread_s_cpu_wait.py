"""GPUWARDEN_GATE_WAIT=auto: the gate's waits yield the CPU while the thread that waits in the
gate itself waits for a CPU (its scheduler run delay, averaged, from 10 % of the time on) and
sleep again under 2 %, or while the container's CPU quota throttles it (lim_wait_choose,
pressure.c; docs/compute.md, known limits: on a node whose cores are all busy a sleeping
launcher loses GPU time)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

SLEEP, YIELD = 0, 1


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2171296 137498 2\n", "137498"),
        ("0 0 0", "0"),
        ("18446744073709551615 18446744073709551615 1\n", "18446744073709551615"),
        ("18446744073709551616 1 1\n", "malformed"),  # over 64 bits
        ("2171296 137498\n", "malformed"),
        ("2171296  137498 2\n", "malformed"),
        ("a 1 2\n", "malformed"),
        ("1 2 3 4\n", "malformed"),
        ("", "malformed"),
    ],
)
def test_the_run_delay_of_a_schedstat_is_read_or_refused(limiter_driver, text: str,
                                                        want: str) -> None:
    assert limiter_driver.run("parse", "schedstat", text).strip() == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 10\nnr_throttled 4\n"
         "throttled_usec 900\n", "4"),
        ("nr_throttled 0", "0"),
        ("usage_usec 5\nnr_periods 10\n", "malformed"),  # no quota accounting in this group
        ("nr_throttled x\n", "malformed"),
        ("xnr_throttled 4\n", "malformed"),
        ("nr_throttled 4 5\n", "malformed"),
        ("", "malformed"),
    ],
)
def test_nr_throttled_of_a_cpu_stat_is_read_or_refused(limiter_driver, text: str,
                                                       want: str) -> None:
    assert limiter_driver.run("parse", "throttled", text).strip() == want


def test_the_cpu_wait_average_follows_samples_a_quarter_at_a_time(limiter_driver) -> None:
    half_s = 500_000_000
    # 30 % of each half second waited: 7.5 %, 13.1 %, 17.3 %, ... towards 30 %
    got = limiter_driver.run("cpuwait", 0, *[half_s * 3 // 10, half_s] * 3).split()
    assert got == ["750", "1312", "1734"]
    # an empty window leaves it; a delay longer than the window counts as all of it
    assert limiter_driver.run("cpuwait", 1234, 5, 0).split() == ["1234"]
    assert limiter_driver.run("cpuwait", 0, 2 * half_s, half_s).split() == ["2500"]
    # from all to nothing: 75 %, 56.25 %, ...
    assert limiter_driver.run("cpuwait", 10000, 0, half_s, 0, half_s).split() == ["7500", "5625"]


NEVER = None
SECOND = 1_000_000_000


@pytest.mark.parametrize(
    ("way", "x100", "throttled_ago_s", "want"),
    [
        (SLEEP, 0, NEVER, SLEEP), (SLEEP, 999, NEVER, SLEEP), (SLEEP, 1000, NEVER, YIELD),
        (SLEEP, 9000, NEVER, YIELD),
        # between 2 % and 10 % the way it waits now holds (no flapping near one threshold)
        (YIELD, 999, NEVER, YIELD), (YIELD, 200, NEVER, YIELD), (YIELD, 199, NEVER, SLEEP),
        (SLEEP, 500, NEVER, SLEEP),
        # a quota throttled within the last 10 s: yielding would only burn it
        (SLEEP, 9000, 0, SLEEP), (YIELD, 9000, 0, SLEEP), (YIELD, 9000, 9.9, SLEEP),
        # ... and 10 s after the last throttled period, the run delay decides again
        (SLEEP, 9000, 10, YIELD), (YIELD, 999, 30, YIELD),
    ],
)
def test_waits_yield_from_10pct_cpu_wait_and_sleep_under_2_or_10s_after_a_throttle(
        limiter_driver, way: int, x100: int, throttled_ago_s: float | None, want: int) -> None:
    now = 100 * SECOND
    at = 0 if throttled_ago_s is None else now - int(throttled_ago_s * SECOND)
    assert int(limiter_driver.run("waitchoose", way, x100, now, at)) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0::/kubepods.slice/pod-1.slice/cri-containerd-2.scope\n",
         "/kubepods.slice/pod-1.slice/cri-containerd-2.scope"),
        ("0::/\n", "/"),  # a container's own namespace: its group is the root
        ("12:cpu,cpuacct:/x\n1:name=systemd:/\n0::/user.slice\n", "/user.slice"),
        ("12:cpu,cpuacct:/x\n1:name=systemd:/\n", "none"),  # cgroup v1 only
        ("10::/not-unified\n", "none"),
        ("0::/" + "a" * 80 + "\n", "none"),  # longer than the driver's 64-byte buffer
        ("", "none"),
    ],
)
def test_the_container_s_own_group_is_found_in_its_cgroup_file(limiter_driver, text: str,
                                                                want: str) -> None:
    assert limiter_driver.run("cgroup2", text).strip() == want


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Spinners:
    """One process spinning on each CPU this test may use, for as long as the block runs."""

    def __enter__(self) -> Spinners:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in os.sched_getaffinity(0)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


SWITCHED = "the launching thread waited for a CPU"


@pytest.mark.slow
def test_waits_use_the_cpu_only_when_they_yield(loop, sim_gpu) -> None:
    cpu, shares, stderr = {}, {}, {}
    for wait in ("sleep", "yield", "auto"):
        before = children_cpu_s()
        r = loop.fresh(wait).run(sim_gpu.env, "kernel", 1000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                                 GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT=wait,
                                 LIBCUDA_LOG_LEVEL="3")
        cpu[wait], shares[wait] = (children_cpu_s() - before) / 2.0, float(r["share"])
        stderr[wait] = str(r["stderr"])
    facts = {"cpu share of wall": cpu, "gpu shares": shares}
    print(facts)
    for share in shares.values():
        assert share == pytest.approx(0.30, abs=0.05), facts
    # asleep, 300 launches a second cost little CPU; runnable while waiting ~70 % of the time,
    # most of a core (less where the machine is busy: yielding gives it to others); `auto` on a
    # calm machine: its launching thread hardly waits for a CPU, so it sleeps
    assert cpu["sleep"] < 0.1 and cpu["auto"] < 0.1, facts
    assert cpu["yield"] > 0.2, facts
    assert SWITCHED not in stderr["auto"], stderr["auto"]
    for wait in stderr:
        assert "GPUWARDEN_" not in stderr[wait], (wait, stderr[wait])


@pytest.mark.slow
def test_auto_yields_once_every_cpu_is_busy_and_the_launcher_waits_for_one(loop,
                                                                          sim_gpu) -> None:
    # a launcher that spins in its synchronisations, as CUDA's does by default, beside one
    # spinning process per CPU: asleep between bursts, it gets a CPU only in turns
    with Spinners():
        r = loop.run(sim_gpu.env, "kernel", 1000, 3.0, CUDA_DEVICE_SM_LIMIT="70",
                     GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT="auto",
                     GPUWARDEN_SIM_SYNC="spin", LAUNCH_LOOP_SYNC="4", LIBCUDA_LOG_LEVEL="3")
    err = str(r["stderr"])
    assert SWITCHED in err and "gate waits yield" in err, err
    # yielding, it still waits for a CPU whenever a spinner holds it: it stays yielding
    assert "gate waits sleep" not in err, err
    assert "GPUWARDEN_" not in err, err


# Runs its arguments in a mount namespace of its own whose /sys/fs/cgroup is a tmpfs holding the
# process's cgroup v2 group (GWTEST_GROUP) with a cpu.stat whose nr_throttled rises ten times a
# second while they run: what a container sees whose CPU quota throttles it (this machine's
# cgroups are v1, where no quota reaches a cgroup v2 cpu.stat).  The writer keeps none of the
# loop's pipes open, and stops once the loop is gone.
THROTTLED = r"""
set -e
mount -t tmpfs gwtest /sys/fs/cgroup
mkdir -p "/sys/fs/cgroup$GWTEST_GROUP"
f="/sys/fs/cgroup$GWTEST_GROUP/cpu.stat"
stat() { printf 'usage_usec 1\nnr_periods %d\nnr_throttled %d\nthrottled_usec %d\n' $1 $1 $1; }
stat 0 > "$f"
(n=0; while kill -0 $$ 2>/dev/null; do n=$((n + 1)); stat $n > "$f.new"; mv "$f.new" "$f";
 sleep 0.1; done) </dev/null >/dev/null 2>&1 &
exec "$@"
"""


def own_cgroup2_group() -> str:
    text = Path("/proc/self/cgroup").read_text()
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise AssertionError(f"no cgroup v2 line in /proc/self/cgroup:\n{text}")


@pytest.mark.slow
def test_auto_keeps_sleeping_while_the_container_s_cpu_quota_throttles_it(loop,
                                                                          sim_gpu) -> None:
    # the launcher waits for a CPU as in the test above, but the waits are throttled quota:
    # yielding would only burn it
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", THROTTLED, "sh"]
    with Spinners():
        r = loop.run(sim_gpu.env, "kernel", 1000, 3.0, prefix=prefix,
                     GWTEST_GROUP=own_cgroup2_group().rstrip("/"), CUDA_DEVICE_SM_LIMIT="70",
                     GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT="auto",
                     GPUWARDEN_SIM_SYNC="spin", LAUNCH_LOOP_SYNC="4", LIBCUDA_LOG_LEVEL="3")
    err = str(r["stderr"])
    assert "but the container's CPU quota throttles it (/sys/fs/cgroup" in err, err
    assert "gate waits yield" not in err, err
