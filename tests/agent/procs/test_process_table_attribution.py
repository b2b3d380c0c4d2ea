"""Children belong to their workload: through fork events, through a rebuild from a fixture
/proc tree (marker, recorded root with its start time, ancestry), and a reused PID is not taken
for the workload's root."""

from __future__ import annotations

from pathlib import Path

from agent.model import Pid
from agent.procfs import read_proc, scan, start_time
from agent.proctree import ProcessTable


def fake_proc(root: Path, pid: int, ppid: int, start: int, comm: str = "x",
              env: dict[str, str] | None = None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    # comm with a space and a ')' to prove the parser splits at the last ')'
    rest = " ".join(["S", str(ppid)] + ["0"] * 17 + [str(start), "0"])
    (d / "stat").write_text(f"{pid} ({comm}) {rest}\n")
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in
                                           (env or {}).items()) + b"\0")


def test_procfs_parses_stat_and_marker(tmp_path: Path) -> None:
    fake_proc(tmp_path, 10, 1, 555, comm="we ird) name", env={"GPUWARDEN_WORKLOAD": "wl-1"})
    info = read_proc(10, tmp_path)
    assert info is not None and (info.ppid, info.start_time, info.comm, info.marker) == (
        1, 555, "we ird) name", "wl-1")
    assert start_time(10, tmp_path) == 555 and start_time(11, tmp_path) is None


def test_fork_events_attach_children_and_exit_detaches() -> None:
    t = ProcessTable()
    t.attach(Pid(100), "w", 1)
    assert t.on_fork(Pid(100), Pid(101), 2) == "w"
    assert t.on_fork(Pid(101), Pid(102), 3) == "w"
    assert t.on_fork(Pid(7), Pid(8), 3) is None
    assert t.pids_of("w") == {100, 101, 102}
    assert t.on_exit(Pid(101)) == "w" and t.pids_of("w") == {100, 102}


def test_rebuild_from_proc_tree(tmp_path: Path) -> None:
    fake_proc(tmp_path, 1, 0, 1)
    fake_proc(tmp_path, 200, 1, 50, env={"GPUWARDEN_WORKLOAD": "a"})  # root of a
    fake_proc(tmp_path, 201, 200, 51)  # child that cleared its env
    fake_proc(tmp_path, 202, 201, 52)  # grandchild
    fake_proc(tmp_path, 300, 1, 60)  # recorded root of b
    fake_proc(tmp_path, 400, 1, 70)  # recorded root of c, but the PID was reused
    fake_proc(tmp_path, 500, 1, 80)  # stranger
    t = ProcessTable()
    t.attach(Pid(999), "a", 5)  # died while the agent was down
    t.rebuild(scan(tmp_path), known={"a", "b", "c"},
              roots={"b": (Pid(300), 60), "c": (Pid(400), 69)})
    assert t.pids_of("a") == {200, 201, 202}
    assert t.pids_of("b") == {300}
    assert t.pids_of("c") == frozenset()
    assert Pid(500) not in t.owner and Pid(999) not in t.owner


def test_exited_and_zombie_processes_are_not_running(tmp_path: Path) -> None:
    """The agent drops these from a sampled NVML view: a workload's process that has exited
    since the sample must not come back as an 'unmanaged' GPU process."""
    from agent.procfs import running

    fake_proc(tmp_path, 20, 1, 100, comm="alive")
    fake_proc(tmp_path, 21, 1, 100, comm="zombie")
    stat = tmp_path / "21" / "stat"
    stat.write_text(stat.read_text().replace(") S ", ") Z "))
    assert running(20, tmp_path)
    assert not running(21, tmp_path)
    assert not running(22, tmp_path)  # gone
