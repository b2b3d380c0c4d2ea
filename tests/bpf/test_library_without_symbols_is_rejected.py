"""A library that is not a CUDA driver (or not a library at all) is refused with a message that
names the file, what it lacks, and what to give instead: by check_environment, by AuditProbe,
and by the CLI (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cprog import compile_c

from bpf.audit import AuditProbe, LibraryError, check_environment

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def not_cuda(tmp_path: Path) -> Path:
    src = tmp_path / "notcuda.c"
    src.write_text("int cuInit(unsigned f);\nint cuInit(unsigned f) { return (int)f; }\n")
    return compile_c(src, tmp_path, name="libnotcuda.so", extra_flags=["-shared", "-fPIC"])


def test_check_environment_names_the_missing_symbols(not_cuda: Path) -> None:
    problems = [p for p in check_environment([not_cuda]) if p.startswith("library")]
    assert problems == [
        f"library {not_cuda}: not a CUDA driver library: it exports none of "
        "cuMemAlloc_v2, cuMemFree_v2 (give the libcuda.so.1 that programs load)"
    ]


def test_not_an_elf_file_and_missing_file(tmp_path: Path) -> None:
    text = tmp_path / "libcuda.so.1"
    text.write_text("not a library\n")
    missing = tmp_path / "nope.so"
    problems = check_environment([text, missing])
    assert f"library {text}: not an ELF file (expected a shared library such as libcuda.so.1)" in (
        problems
    )
    assert any(p.startswith(f"library {missing}: no such file") for p in problems)


def test_environment_problems_are_sentences() -> None:
    problems = check_environment(euid=1000, sys_root=Path("/nonexistent"))
    assert any(p.startswith("not running as root") for p in problems)
    assert any("tracefs is not mounted on /nonexistent/sys/kernel/tracing" in p for p in problems)
    assert any("no kernel headers at /nonexistent/lib/modules/" in p for p in problems)


@pytest.mark.bpf
def test_audit_probe_refuses_it(not_cuda: Path) -> None:
    with pytest.raises(LibraryError, match=r"libnotcuda\.so: not a CUDA driver library"):
        AuditProbe(libs=[not_cuda]).start()


@pytest.mark.bpf
@pytest.mark.parametrize("command", ["trace", "check"])
def test_cli_exits_2_with_the_reason(not_cuda: Path, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuwarden.cli", "bpf", command, "--lib", str(not_cuda)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{not_cuda}: not a CUDA driver library" in done.stderr
    assert "cuMemAlloc_v2" in done.stderr
