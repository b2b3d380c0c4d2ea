"""Helpers of the eBPF audit tests: compiling the C programs and driving cuda_ops."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSRC = HERE / "csrc"
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror"]


def compile_c(src: Path, out: Path, *extra: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", *CFLAGS, str(src), "-o", str(out), *extra], check=True)
    return out


def build_fake_libcuda(out_dir: Path) -> Path:
    return compile_c(
        CSRC / "fakecuda.c",
        out_dir / "libcuda.so.1",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Wl,-soname,libcuda.so.1",
    )


@dataclass(frozen=True)
class Driver:
    """A libcuda.so.1 and the environment that makes cuda_ops load it."""

    lib: Path
    env: dict[str, str]


@dataclass
class OpsResult:
    pid: int
    returncode: int
    lines: list[str]

    def returned(self, op: str) -> list[dict[str, str]]:
        """The key=value fields of each `returned <op> ...` line."""
        out = []
        for line in self.lines:
            parts = line.split()
            if parts[:2] == ["returned", op]:
                out.append(dict(p.split("=", 1) for p in parts[2:] if "=" in p))
        return out


class Ops:
    """A running cuda_ops process, for tests that look at it while it waits on stdin."""

    def __init__(self, binary: Path, driver: Driver, ops: list[str]) -> None:
        self.proc = subprocess.Popen(
            [str(binary), *ops],
            env=driver.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        first = self._line()
        assert first.startswith("pid "), f"cuda_ops did not start: {first!r}"
        self.pid = int(first.split()[1])

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"cuda_ops ended early; output {self.lines}, stderr {err!r}")
        self.lines.append(line.rstrip("\n"))
        return self.lines[-1]

    def wait_for(self, text: str = "waiting") -> None:
        while self._line() != text:
            pass

    def resume(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout: float = 60) -> OpsResult:
        out, _err = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines()
        return OpsResult(self.pid, self.proc.returncode, self.lines)

    def result(self) -> OpsResult:
        return OpsResult(self.pid, self.proc.returncode or 0, self.lines)


def run_ops(binary: Path, driver: Driver, *ops: str, timeout: float = 120) -> OpsResult:
    proc = subprocess.run(
        [str(binary), *ops], env=driver.env, capture_output=True, text=True, timeout=timeout
    )
    lines = proc.stdout.splitlines()
    assert lines and lines[0].startswith("pid "), (lines, proc.stderr)
    return OpsResult(int(lines[0].split()[1]), proc.returncode, lines)
