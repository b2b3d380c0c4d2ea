"""agent.procfs.environ_values reads named variables from /proc/PID/environ (fixture trees)."""

from __future__ import annotations

from pathlib import Path

from agent.procfs import environ_values


def test_reads_only_the_named_variables(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "environ").write_bytes(
        b"PATH=/bin\0CUDA_VISIBLE_DEVICES=1,0\0NVIDIA_VISIBLE_DEVICES=\0X=CUDA_VISIBLE_DEVICES=9\0")
    got = environ_values(42, ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HOME"), tmp_path)
    assert got == {"CUDA_VISIBLE_DEVICES": "1,0", "NVIDIA_VISIBLE_DEVICES": ""}


def test_a_vanished_process_has_no_environment(tmp_path: Path) -> None:
    assert environ_values(7, ("CUDA_VISIBLE_DEVICES",), tmp_path) == {}
