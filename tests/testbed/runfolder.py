"""The run folder that holds everything one test-bed run creates, and the clean-up of runs: kill
the processes that name the folder, delete the containers of its runc roots, unmount every mount
below it (deepest first; lazily as a last resort), remove it.  Runs whose owner process is gone
(a crashed or killed session) are cleaned when the next run starts."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["PREFIX", "RunFolder", "clean_run", "clean_stale_runs", "delete_runc_containers",
           "filesystem_type", "keep_logs", "kill_pids_naming", "mounts_under", "pids_naming",
           "pod_cgroups", "remove_pod_cgroups", "unmount_all"]

PREFIX = "gwtb-"
BASE = Path("/tmp")
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _unescape(field: str) -> str:
    # /proc/self/mountinfo writes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the file system `path` lies on (its deepest enclosing mount)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    target, best, fstype = str(path.resolve()), -1, ""
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, fstype = len(point), line.split(" - ", 1)[1].split()[0]
    return fstype


def mounts_under(folder: Path, mountinfo: str | None = None) -> list[str]:
    """Mount points at or below `folder`, deepest first (the order to unmount them in)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    top = str(folder).rstrip("/")
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        if point == top or point.startswith(top + "/"):
            points.append(point)
    # repeated points are stacked mounts: each needs its own unmount
    return sorted(points, key=lambda p: p.count("/"), reverse=True)


def unmount_all(folder: Path, rounds: int = 5) -> None:
    """Unmount everything at or below `folder`; raises OSError naming what stays mounted."""
    for _ in range(rounds):
        points = mounts_under(folder)
        if not points:
            return
        for point in points:
            if _libc.umount2(point.encode(), 0) != 0:
                err = ctypes.get_errno()
                if err in (errno.EINVAL, errno.ENOENT):
                    continue  # already gone with its parent
                _libc.umount2(point.encode(), MNT_DETACH)
    left = mounts_under(folder)
    if left:
        raise OSError(f"could not unmount under {folder}: {', '.join(left)}")


def pids_naming(text: str) -> list[int]:
    """Processes (not this one) whose command line contains `text`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


def kill_pids_naming(text: str, timeout: float = 5.0) -> None:
    for pid in pids_naming(text):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while pids_naming(text) and time.monotonic() < deadline:
        time.sleep(0.05)


def delete_runc_containers(runc_root: Path, runc: str = "runc") -> None:
    """Kill and delete every container of a runc root (one folder per containerd namespace)."""
    if not runc_root.is_dir():
        return
    for ns_root in runc_root.iterdir():
        listed = subprocess.run([runc, "--root", str(ns_root), "list", "-q"],
                                capture_output=True, text=True)
        for cid in listed.stdout.split():
            subprocess.run([runc, "--root", str(ns_root), "delete", "--force", cid],
                           capture_output=True)


CGROUP_ROOT = Path("/sys/fs/cgroup")


def pod_cgroups(uids: list[str], root: Path = CGROUP_ROOT) -> list[Path]:
    """The kubelet's cgroups of these pods (kubepods[/besteffort|/burstable]/pod<uid>, cgroupfs
    driver) in every v1 hierarchy or the v2 one, their children first."""
    found: list[Path] = []
    for uid in uids:
        for pattern in ("*/kubepods/", "kubepods/"):
            for top in [*root.glob(f"{pattern}pod{uid}"), *root.glob(f"{pattern}*/pod{uid}")]:
                found += [Path(d) for d, _, _ in os.walk(top, topdown=False)]
    return found


def remove_pod_cgroups(kubelet_root: Path) -> None:
    """Remove the cgroups of the pods a node's kubelet ran (its root's pods/<uid> folders);
    their processes must be gone (the containers deleted) first."""
    pods = kubelet_root / "pods"
    uids = [p.name for p in pods.iterdir()] if pods.is_dir() else []
    for cgroup in pod_cgroups(uids):
        with contextlib.suppress(OSError):
            cgroup.rmdir()


def clean_run(folder: Path) -> None:
    """Remove everything of one run: its containers, processes, pod cgroups, mounts, then the
    folder."""
    for runc_root in folder.glob("*/runc"):
        delete_runc_containers(runc_root)
    kill_pids_naming(str(folder))
    for kubelet_root in folder.glob("*/kubelet"):
        remove_pod_cgroups(kubelet_root)
    unmount_all(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(folder: Path) -> bool:
    try:
        pid_s, start = (folder / "owner").read_text().split()
    except (OSError, ValueError):
        # a folder being created right now has no owner file yet: leave young ones alone
        try:
            return time.time() - folder.stat().st_mtime < 60
        except OSError:
            return False
    return _start_time(int(pid_s)) == start


def clean_stale_runs(base: Path = BASE) -> list[Path]:
    """Clean the run folders under `base` whose owner process is gone; returns them."""
    stale = [f for f in base.glob(PREFIX + "*") if f.is_dir() and not _owner_alive(f)]
    for folder in stale:
        clean_run(folder)
    return stale


class RunFolder:
    """/tmp/gwtb-<8 hex>: owned by this process (pid and start time in `owner`)."""

    def __init__(self, base: Path = BASE) -> None:
        clean_stale_runs(base)
        self.id = secrets.token_hex(4)
        self.path = base / f"{PREFIX}{self.id}"
        self.path.mkdir(mode=0o755)
        (self.path / "owner").write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")

    def remove(self) -> None:
        keep_logs(self.path)
        clean_run(self.path)


def keep_logs(folder: Path) -> Path | None:
    """Copy the run's component logs to $GPUWARDEN_TESTBED_KEEP_LOGS/<run folder name>/ when
    that variable names a folder (to read after a failed run); returns the copy."""
    dest_root = os.environ.get("GPUWARDEN_TESTBED_KEEP_LOGS")
    if not dest_root or not folder.is_dir():
        return None
    # a run folder (gwtb-<id>) or one of its nodes' (gwtb-<id>/node-<name>)
    name = folder.name if folder.name.startswith(PREFIX) else f"{folder.parent.name}/{folder.name}"
    dest = Path(dest_root) / name
    for logs in [folder / "logs", folder / "pod-logs", *folder.glob("node-*/logs"),
                 *folder.glob("node-*/pod-logs")]:
        if logs.is_dir():
            shutil.copytree(logs, dest / logs.relative_to(folder), dirs_exist_ok=True,
                            symlinks=True)
    return dest
