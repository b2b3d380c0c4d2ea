"""Admission (libvgpu/src/budget.c) without a lock: 8 threads reserving chunks against one limit
admit exactly what fits and never pass it; the boundary is exact (limit - 1, limit, limit + 1);
releases never underflow; memory views never underflow."""

from __future__ import annotations

import subprocess

from shimtest import build


def test_budget_is_exact_under_contention(tmp_path) -> None:
    exe = build("unit_budget", tmp_path, ["budget"], ["-fsanitize=thread"])
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "ok"
    assert "WARNING: ThreadSanitizer" not in res.stderr
