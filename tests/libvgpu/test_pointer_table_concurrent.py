"""The O(1) pointer table (libvgpu/src/ptrtab.c): concurrent insert/remove from 4 threads on a
deliberately tiny table, so bounded probing and the overflow list are both exercised; every key
comes back once with its own size; unknown keys miss; a large table needs no overflow."""

from __future__ import annotations

import subprocess

from shimtest import build


def test_pointer_table_survives_concurrency_and_overflow(tmp_path) -> None:
    exe = build("unit_ptrtab", tmp_path, ["ptrtab"], ["-fsanitize=thread"])
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
    assert "WARNING: ThreadSanitizer" not in res.stderr
