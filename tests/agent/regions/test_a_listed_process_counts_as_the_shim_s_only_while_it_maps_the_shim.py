"""A process that the shim lists in its region's slots counts as running the shim only while the
shim's file is mapped in it: one that exec()s a program without LD_PRELOAD keeps its pid, its
start time and so its slot. Its maps are looked at every slot period, under the agent's proc
root; a second look at least EXEC_SETTLE after the first that still finds no libvgpu.so drops it
from the shim's processes (the bypass check then judges it) and reports a `shim_unloaded` event.
Maps that still show the shim (also a file deleted since), a process that has gone, and maps
that cannot be read change nothing; an unreadable file is reported once.

Over a fixture proc root and a real region file; no process runs the shim here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.decide import AgentPolicy, judge
from agent.ledger import WorkloadRecord
from agent.model import GpuUuid, Pid, Rule, Snapshot, VerdictKind, Workload, WorkloadKey
from agent.procfs import maps_file
from agent.proctree import ProcessTable
from agent.shimcheck import EXEC_SETTLE, Maps, ShimCheck, check_shims
from agent.workloads import SLOTS_PERIOD, Regions, Tracked
from deviceplugin.allocation import CONTAINER_LIB
from libvgpu import region as lr
from libvgpu.paths import SHIM_NAME, shim_path

UUID = "GPU-00000000-0000-0000-0000-0000000000aa"
MiB = 1 << 20
PID, START = Pid(4242), 777  # a process of the workload as the fixture root shows it
SHIM_LINE = ("7f31c2a00000-7f31c2a2e000 r-xp 00000000 fd:01 1311 "
             "/usr/local/gpuwarden/lib/libvgpu.so\n")
PLAIN = ("55d0c0a00000-55d0c0a01000 r-xp 00000000 fd:01 99 /usr/bin/python3.11\n"
         "7f31c2c00000-7f31c2c28000 r-xp 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
         "7ffd5a1f0000-7ffd5a211000 rw-p 00000000 00:00 0 [stack]\n")
# a preloaded library that is not the shim, whose name only contains the shim's
LOOKALIKE = "7f31c2b00000-7f31c2b10000 r-xp 00000000 fd:01 78 /opt/x/libvgpu.so.bak\n"


class World:
    """A region listing PID (slot 0), a proc root whose PID/maps the test writes, the agent's
    Regions over them, and a clock the test moves."""

    def __init__(self, tmp: Path, ns_pid: int | None = None, exec_events: bool = False) -> None:
        self.proc = tmp / "proc"
        (self.proc / str(PID)).mkdir(parents=True)
        self.region = tmp / "w.region"
        lr.Region.create(self.region, [(UUID, 1 << 30)]).close()
        with lr.Region.open(self.region) as r:
            s = lr.RegionStruct.from_buffer(r._mm)  # test-only poke at the mapping
            p, d = s.procs[0], s.devices[0]
            p.pid, p.start_time, p.used_bytes[0] = ns_pid or PID, START, 256 * MiB
            p.state, d.used_bytes = lr.PROC_ACTIVE, 256 * MiB
            del s, p, d
        self.table = ProcessTable()
        self.table.attach(PID, "w", START)
        self.events: list[dict[str, Any]] = []
        self.regions = Regions(self.events.append, lambda: 0.0, str(self.proc),
                               exec_events=lambda: exec_events)
        pod = "uid-1" if ns_pid is not None else ""
        self.t = Tracked(WorkloadRecord(wid="w", namespace="ns", name="w",
                                        region=str(self.region), pod_uid=pod),
                         WorkloadKey("ns", "w"), Rule(name="r"))
        self.regions.open(self.t)
        self.host_pids: Callable[[Tracked, dict[int, int]], set[int]] | None = None
        if ns_pid is not None:  # the container's pid namespace: ns_pid there is PID here
            self.host_pids = lambda t, procs: {PID} if procs.get(ns_pid) == START else set()

    def maps(self, text: str) -> None:
        (self.proc / str(PID) / "maps").write_text(text)

    def at(self, now: float) -> Workload:
        return self.regions.workload(self.t, now, self.table, (), self.host_pids)

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def test_a_listed_process_whose_maps_lack_the_shim_is_not_the_shim_s_after_a_second_look(
        world: World) -> None:
    world.maps(PLAIN)  # e.g. `env -u LD_PRELOAD exec python3.11 ...`
    w = world.at(100.0)
    assert w.shim_pids == {PID}, "one look is not enough: the loader may not have mapped it yet"
    assert world.at(100.0 + EXEC_SETTLE).shim_pids == {PID}, "no look before the slot period"
    assert SLOTS_PERIOD >= EXEC_SETTLE
    w = world.at(100.0 + SLOTS_PERIOD)
    assert w.shim_pids == frozenset() and w.pids == {PID}
    assert w.shim_leaving == frozenset(), "it has not left: it runs on without the shim"
    [ev] = world.of("shim_unloaded")
    assert ev["pid"] == PID and ev["workload"] == {"id": "w", "namespace": "ns", "pod": "w",
                                                   "container": "main"}
    assert "libvgpu.so is no longer mapped" in ev["detail"]
    assert world.at(110.0).shim_pids == frozenset() and len(world.of("shim_unloaded")) == 1
    assert w.shim_used == {UUID: 256 * MiB}, "its slot's bytes are still the shim's count"

    # the bypass check now judges it: on the GPU, not listed as running the shim
    gpu = GpuUuid(UUID)
    [v] = judge(Snapshot(workloads=(w,), ebpf={PID: {gpu: 256 * MiB}}),
                AgentPolicy(unmanaged=Rule(name="unmanaged")))
    assert v.kind == VerdictKind.BYPASS
    assert v.detail == "1 process(es) on the GPU without the shim"

    world.maps(PLAIN + SHIM_LINE)  # it exec()s again, with the shim: the shim's again
    assert world.at(112.0).shim_pids == {PID} and len(world.of("shim_unloaded")) == 1
    assert world.t.shim_check == ShimCheck()


def test_with_exec_events_only_a_process_that_exec_ed_is_looked_at_again(tmp_path: Path) -> None:
    """A torch process's maps hold thousands of lines (~1 ms to read): while the kernel's exec
    events reach the agent, a listed process is looked at when first listed, after an exec, and
    again while a look found it without the shim; after an overrun of the events, all again."""
    world = World(tmp_path, exec_events=True)
    world.maps(PLAIN + SHIM_LINE)
    assert world.at(100.0).shim_pids == {PID}  # first listed: looked at
    world.maps(PLAIN)  # an exec the agent has not heard of (yet)
    for now in (102.0, 104.0, 106.0):
        assert world.at(now).shim_pids == {PID}, "looked at without an exec event"
    Regions.on_exec(PID, {"w": world.t})
    assert world.at(108.0).shim_pids == {PID}  # looked at: missing once
    w = world.at(110.0)  # looked at again (found missing before): judged
    assert w.shim_pids == frozenset() and len(world.of("shim_unloaded")) == 1

    again = World(tmp_path / "overrun", exec_events=True)
    again.maps(PLAIN + SHIM_LINE)
    assert again.at(100.0).shim_pids == {PID}
    again.maps(PLAIN)
    assert again.at(102.0).shim_pids == {PID} and again.at(104.0).shim_pids == {PID}
    Regions.look_at_all({"w": again.t})  # exec events were lost
    assert again.at(106.0).shim_pids == {PID}
    assert again.at(108.0).shim_pids == frozenset()


@pytest.mark.parametrize("where", ["container", "build", "deleted"])
def test_a_listed_process_that_maps_the_shim_stays_the_shim_s(world: World, where: str) -> None:
    maps = {
        "container": SHIM_LINE,  # as the device plugin mounts it into a container
        "build": f"7f0000000000-7f0000001000 r-xp 00000000 08:01 5 {shim_path()}\n",  # `run`'s
        "deleted": SHIM_LINE.replace(".so\n", ".so (deleted)\n"),  # the host file replaced
    }[where]
    world.maps(PLAIN + maps)
    for now in (100.0, 102.0, 104.0, 106.0):
        assert world.at(now).shim_pids == {PID}
    assert world.events == []


def test_an_exec_that_maps_the_shim_again_between_two_looks_stays_the_shim_s(
        world: World) -> None:
    world.maps(PLAIN)  # looked at in the instant between the exec and the loader's mapping
    assert world.at(100.0).shim_pids == {PID}
    world.maps(PLAIN + SHIM_LINE)
    assert world.at(102.0).shim_pids == {PID}
    world.maps(PLAIN)  # a later miss starts over: one look is not enough
    assert world.at(104.0).shim_pids == {PID}
    assert world.events == []


@pytest.mark.parametrize("gone", ["no maps", "empty maps"])
def test_a_process_that_has_gone_is_left_to_the_exit_logic(world: World, gone: str) -> None:
    """No maps file (exited), or an empty one (a zombie, or a process in its exit): no
    evidence that it dropped the shim."""
    if gone == "empty maps":
        world.maps("")
    for now in (100.0, 102.0, 104.0):
        assert world.at(now).shim_pids == {PID}
    assert world.events == []


def test_maps_that_cannot_be_read_keep_the_verdict_and_are_reported_once(
        world: World) -> None:
    (world.proc / str(PID) / "maps").mkdir()  # reading it fails, neither ENOENT nor ESRCH
    for now in (100.0, 102.0, 104.0):
        assert world.at(now).shim_pids == {PID}
    [err] = world.events
    assert err["event"] == "shim_check_error" and err["pid"] == PID
    assert err["handling"] == "a process whose maps cannot be read counts as running the shim"

    # nor do they undo a verdict already reached
    (world.proc / str(PID) / "maps").rmdir()
    world.maps(PLAIN)
    world.at(200.0)
    assert world.at(202.0).shim_pids == frozenset()
    (world.proc / str(PID) / "maps").unlink()
    (world.proc / str(PID) / "maps").mkdir()
    assert world.at(204.0).shim_pids == frozenset()
    assert [e["event"] for e in world.events] == ["shim_check_error", "shim_unloaded"]


def test_a_pod_container_s_process_is_looked_at_by_its_host_pid(tmp_path: Path) -> None:
    """The shim lists namespace pid 7; the agent reads the maps of its host pid."""
    world = World(tmp_path, ns_pid=7)
    world.maps(PLAIN)
    assert world.at(100.0).shim_pids == {PID}
    assert world.at(102.0).shim_pids == frozenset()
    [ev] = world.of("shim_unloaded")
    assert ev["pid"] == PID


def test_the_check_is_pure_and_remembers_only_listed_processes() -> None:
    a, b = Pid(1), Pid(2)
    listed = frozenset({a, b})
    c = check_shims(listed, {a: Maps.MISSING, b: Maps.LOADED}, ShimCheck(), 10.0)
    assert c == ShimCheck({a: 10.0}, frozenset())
    c = check_shims(listed, {a: Maps.MISSING, b: Maps.UNKNOWN}, c, 10.0 + EXEC_SETTLE)
    assert c.unloaded == {a}
    assert check_shims(listed, {}, c, 99.0) == c, "not looked at: as judged before"
    assert check_shims(listed, {a: Maps.UNKNOWN}, c, 99.0) == c
    assert check_shims(frozenset({b}), {a: Maps.MISSING}, c, 99.0) == ShimCheck(), \
        "its slot is gone: forgotten"


def test_maps_are_matched_on_the_shim_s_file_name_in_the_path_column() -> None:
    assert maps_file((PLAIN + SHIM_LINE).encode(), SHIM_NAME) is True
    assert maps_file(PLAIN.encode(), SHIM_NAME) is False
    assert maps_file((PLAIN + LOOKALIKE).encode(), SHIM_NAME) is False
    assert maps_file(SHIM_LINE.replace("/usr/local/gpuwarden/lib/", "/x/my").encode(),
                     SHIM_NAME) is False, "another file whose name ends the same"
    assert maps_file(b"", SHIM_NAME) is None


def test_the_name_looked_for_is_the_shim_s_wherever_it_is_mounted() -> None:
    assert Path(CONTAINER_LIB).name == SHIM_NAME == shim_path().name
