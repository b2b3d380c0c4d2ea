"""With cgroup_ids, the probes trace only callers in those (v2) cgroups, in the kernel: a
process in the cgroup is accounted, the same program outside it is not."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe, Running

from bpf.audit import AuditProbe

pytestmark = pytest.mark.bpf


def _cgroup2_root() -> Path:
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if parts[2] == "cgroup2":
            return Path(parts[1])
    raise AssertionError("no cgroup2 file system mounted (see /proc/mounts)")


@pytest.fixture
def cgroup() -> Iterator[Path]:
    path = _cgroup2_root() / f"gpuwarden-audit-test-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            os.kill(int(pid), 9)
        path.rmdir()


def test_only_the_cgroup_is_traced(cgroup: Path, cudaprobe: CudaProbe, driver: Driver) -> None:
    cgroup_id = os.stat(cgroup).st_ino  # a cgroup v2 id is its directory's inode number
    script = ["init", "primary:0", "alloc:31337", "wait"]
    with AuditProbe(libs=[driver.lib], cgroup_ids={cgroup_id}) as probe:
        shell_env = dict(driver.env, GW_CGROUP_PROCS=str(cgroup / "cgroup.procs"))
        # the shell moves itself into the cgroup, then becomes the program (same pid)
        inside = Running(["/bin/sh", "-c", 'echo $$ > "$GW_CGROUP_PROCS"; exec "$@"', "sh",
                          *cudaprobe.argv(*script)], shell_env)
        outside = cudaprobe.start(*script, env=driver.env)
        try:
            inside.wait_for()
            outside.wait_for()
            snap = probe.snapshot()
            assert snap.get(inside.pid) == {0: 31337}
            assert outside.pid not in snap
            events = [e for e in probe.poll_events() if e.kind == "mem_alloc"]
            assert [(e.pid, e.cgroup_id) for e in events] == [(inside.pid, cgroup_id)]
        finally:
            for p in (inside, outside):
                p.resume()
                p.finish()
