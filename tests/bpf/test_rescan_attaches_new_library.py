"""Finding libcuda: a libcuda that appears after start (a new image, a driver upgrade) is found
through a running process's /proc/PID/maps and attached by rescan(), once per file (device,
inode) however many paths lead to it; the loader's own search path is read too."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from bpf_harness import Driver, build_fake_libcuda
from cudaprobe import CudaProbe

from bpf.audit import AuditProbe
from bpf.libcuda import loader_candidates, process_candidates

pytestmark = pytest.mark.bpf


def test_rescan_attaches_a_library_seen_in_a_process(
    tmp_path: Path, cudaprobe: CudaProbe, driver: Driver
) -> None:
    new_lib = build_fake_libcuda(tmp_path / "image")  # a libcuda file the probe never saw
    env = dict(driver.env, LD_LIBRARY_PATH=str(new_lib.parent))
    with AuditProbe(libs=[driver.lib]) as probe:
        assert [a.ino for a in probe.attached()] == [os.stat(driver.lib).st_ino]
        proc = cudaprobe.start("init", "wait", "alloc:5000", "wait", env=env)
        try:
            proc.wait_for()
            assert proc.pid not in probe.snapshot()
            st = os.stat(new_lib)
            # Other processes on this machine may map other libcuda files: look for ours.
            new = [a for a in probe.rescan() if (a.dev, a.ino) == (st.st_dev, st.st_ino)]
            assert len(new) == 1
            assert str(new[0].path).startswith("/proc/") and "/root/" in str(new[0].path)
            again = probe.rescan()
            assert (st.st_dev, st.st_ino) not in [(a.dev, a.ino) for a in again]  # once
            proc.resume()
            proc.wait_for()
            assert probe.snapshot()[proc.pid] == {-1: 5000}  # seen from the next call on
        finally:
            proc.resume()
            proc.finish()


def test_one_file_two_paths_is_attached_once(tmp_path: Path, driver: Driver) -> None:
    link = tmp_path / "libcuda.so.1"
    os.symlink(driver.lib, link)
    copy = tmp_path / "copy" / "libcuda.so.1"
    copy.parent.mkdir()
    shutil.copy(driver.lib, copy)  # a different file with the same content: attached too
    with AuditProbe(libs=[driver.lib, link, copy]) as probe:
        inos = sorted(a.ino for a in probe.attached())
        assert inos == sorted({os.stat(driver.lib).st_ino, os.stat(copy).st_ino})


def test_loader_path_and_proc_maps_are_read(tmp_path: Path, driver: Driver) -> None:
    found = loader_candidates(env={"LD_LIBRARY_PATH": f"/nonexistent:{driver.lib.parent}"})
    assert (os.stat(driver.lib).st_ino) in [lib.ino for lib in found]
    proc_root = tmp_path / "proc"
    (proc_root / "4242" / "root").mkdir(parents=True)
    (proc_root / "4242" / "root").rmdir()
    os.symlink("/", proc_root / "4242" / "root")
    (proc_root / "4242" / "maps").write_text(
        f"7f0000000000-7f0000100000 r-xp 00000000 fe:00 1234 {driver.lib}\n"
        "7f0000200000-7f0000300000 r-xp 00000000 fe:00 99 /usr/lib/libcudart.so.12\n"
    )
    (proc_root / "self").mkdir()
    libs = process_candidates(proc_root)
    assert [lib.ino for lib in libs] == [os.stat(driver.lib).st_ino]
