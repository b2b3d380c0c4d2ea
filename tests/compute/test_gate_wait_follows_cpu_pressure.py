"""GPUWARDEN_GATE_WAIT=auto: the gate's waits yield the CPU while the container's
CPU pressure (Linux PSI, "some avg10") says its tasks waited for a CPU 20 % of the time or more,
and sleep again under 5 % (lim_wait_choose, pressure.c; docs/compute.md, known limits: on a node
whose cores are all busy a sleeping launcher loses GPU time).  The pressure file is the
container's cgroup's, else the node's; GPUWARDEN_CPU_PRESSURE names another (here, a file the
test writes)."""

from __future__ import annotations

import resource

import pytest

SLEEP, YIELD = 0, 1


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("some avg10=12.34 avg60=1.00 avg300=0.00 total=99", "1234"),
        ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00", "0"),
        ("some avg10=100.00 avg60=1.00", "10000"),
        ("some avg10=100.01 avg60=1.00", "malformed"),
        ("full avg10=12.34 avg60=1.00", "malformed"),
        ("some avg10=12.3 avg60=1.00", "malformed"),
        ("some avg10=.50 avg60=1.00", "malformed"),
        ("some avg10=12.345 avg60=1.00", "malformed"),
        ("", "malformed"),
    ],
)
def test_the_some_avg10_of_a_pressure_file_is_read_or_refused(limiter_driver, text: str,
                                                             want: str) -> None:
    assert limiter_driver.run("parse", "psi", text).strip() == want


@pytest.mark.parametrize(
    ("now", "x100", "want"),
    [
        (SLEEP, 0, SLEEP), (SLEEP, 1999, SLEEP), (SLEEP, 2000, YIELD), (SLEEP, 9000, YIELD),
        # between 5 % and 20 % the way it waits now holds (no flapping on a pressure near one)
        (YIELD, 1999, YIELD), (YIELD, 500, YIELD), (YIELD, 499, SLEEP), (SLEEP, 1000, SLEEP),
    ],
)
def test_waits_yield_from_20pct_pressure_and_sleep_again_under_5(limiter_driver, now: int,
                                                                 x100: int, want: int) -> None:
    assert int(limiter_driver.run("waitchoose", now, x100)) == want


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


# each way of waiting: GPUWARDEN_GATE_WAIT, and for `auto` the pressure file's "some avg10"
# (None: the named file does not exist)
WAYS = {"sleep": ("sleep", "0.40"), "yield": ("yield", "0.40"), "auto calm": ("auto", "0.40"),
        "auto pressed": ("auto", "35.00"), "auto unreadable": ("auto", None)}


@pytest.mark.slow
def test_waits_use_the_cpu_only_when_they_yield_and_auto_yields_only_under_pressure(
        loop, sim_gpu, tmp_path) -> None:
    cpu, shares, stderr = {}, {}, {}
    for name, (wait, some) in WAYS.items():
        pressure = tmp_path / f"{name.replace(' ', '-')}.pressure"
        if some is not None:
            pressure.write_text(f"some avg10={some} avg60={some} avg300={some} total=1\n"
                                "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        before = children_cpu_s()
        r = loop.run(sim_gpu.env, "kernel", 1000, 2.0, CUDA_DEVICE_SM_LIMIT="30",
                     GPU_CORE_UTILIZATION_POLICY="force", GPUWARDEN_GATE_WAIT=wait,
                     GPUWARDEN_CPU_PRESSURE=str(pressure))
        cpu[name], shares[name] = (children_cpu_s() - before) / 2.0, float(r["share"])
        stderr[name] = str(r["stderr"])
    facts = {"cpu share of wall": cpu, "gpu shares": shares}
    print(facts)
    for share in shares.values():
        assert share == pytest.approx(0.30, abs=0.05), facts
    # asleep, 300 launches a second cost little CPU; runnable while waiting ~70 % of the time,
    # most of a core (less where the machine is busy: yielding gives it to others)
    for name in ("sleep", "auto calm", "auto unreadable"):
        assert cpu[name] < 0.1, facts
    for name in ("yield", "auto pressed"):
        assert cpu[name] > 0.2, facts
    # a pressure file named but unusable is an error naming the variable (waits then sleep)
    assert "GPUWARDEN_CPU_PRESSURE='" in stderr["auto unreadable"], stderr["auto unreadable"]
    assert "is not a readable CPU pressure file (valid: a Linux PSI file" in \
        stderr["auto unreadable"], stderr["auto unreadable"]
    for name in ("sleep", "yield", "auto calm", "auto pressed"):
        assert "GPUWARDEN_" not in stderr[name], (name, stderr[name])
