"""The CUDA test program (tests/progs/cudaprobe.c): built once per session, run with a script.

A script is a list of operations, one word each (`init`, `primary:0`, `alloc:1048576`, `wait`,
...; the C file lists them).  The program answers one row per operation after the call returned,
`<op> rc=<CUresult> key=value ...`, which `parse` turns into dicts with the operation's word
under "op".  `CudaProbe.run` runs a whole script; `CudaProbe.start` starts one and gives a
`Running` process that a test looks at while it waits (the `wait` operation) and then resumes.

Tests import this module (not a conftest): every tests/ folder has a conftest module, and which
one `import conftest` finds depends on the order the suite was collected in.  The session
fixture `cudaprobe` (tests/conftest.py) builds it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import TracebackType

from cprog import compile_c

__all__ = ["OOM", "SRC", "CudaProbe", "GiB", "MiB", "Result", "Row", "Running", "parse"]

SRC = Path(__file__).resolve().parent / "progs" / "cudaprobe.c"
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY
MiB, GiB = 2**20, 2**30
ENTRIES = ("dlsym", "procaddr", "direct")

Row = dict[str, str]


def parse(stdout: str) -> tuple[int, list[Row]]:
    """The pid of the header line and one dict per operation row:
    'info rc=0 free=1 total=2' -> {'op': 'info', 'rc': '0', 'free': '1', 'total': '2'}."""
    lines = stdout.splitlines()
    if not lines or not lines[0].startswith("cudaprobe pid="):
        raise AssertionError(f"cudaprobe did not start; its output: {stdout!r}")
    pid = int(lines[0].split()[1].removeprefix("pid="))
    return pid, [parse_row(line) for line in lines[1:]]


def parse_row(line: str) -> Row:
    op, *fields = line.split()
    row = dict(f.split("=", 1) for f in fields)
    row["op"] = op
    return row


@dataclass
class Result:
    """A finished run: its pid, exit status, rows and stderr."""

    pid: int
    returncode: int
    rows: list[Row]
    stderr: str = ""

    def of(self, name: str) -> list[Row]:
        """The rows of the operations called `name` (the word before the first ':')."""
        return [r for r in self.rows if r["op"].split(":", 1)[0] == name]

    def rc(self, op: str) -> int:
        """The CUresult of the one row whose word is exactly `op`."""
        (row,) = [r for r in self.rows if r["op"] == op]
        return int(row["rc"])

    @property
    def ok(self) -> bool:
        """Every operation returned CUDA_SUCCESS and the program exited 0."""
        return self.returncode == 0 and all(r["rc"] == "0" for r in self.rows)


@dataclass
class CudaProbe:
    """The program built into out_dir: `dlsym` reaches the driver through dlopen + dlsym (or
    cuGetProcAddress with entry="procaddr"), `direct` links it at build time (-lcuda against
    the simulated driver; built on first use)."""

    out_dir: Path

    @cached_property
    def dlsym(self) -> Path:
        return compile_c(SRC, self.out_dir / "dlsym")

    @cached_property
    def direct(self) -> Path:
        return compile_c(SRC, self.out_dir / "direct", link_cuda=True, extra_flags=["-DGW_DIRECT"])

    def argv(self, *ops: str, entry: str = "dlsym") -> list[str]:
        if entry not in ENTRIES:
            raise ValueError(f"entry {entry!r}: expected one of {', '.join(ENTRIES)}")
        if entry == "direct":
            return [str(self.direct), *ops]
        head = ["entry:procaddr"] if entry == "procaddr" else []
        return [str(self.dlsym), *head, *ops]

    def run(
        self, *ops: str, env: Mapping[str, str], entry: str = "dlsym", timeout: float = 60
    ) -> Result:
        """Run the script to its end; a bad script (exit 2) or a missing driver (exit 3) raises."""
        done = subprocess.run(
            self.argv(*ops, entry=entry), env=dict(env), capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        if done.returncode in (2, 3):
            raise AssertionError(f"cudaprobe {' '.join(ops)} failed: {done.stderr}")
        pid, rows = parse(done.stdout)
        return Result(pid, done.returncode, rows, done.stderr)

    def start(self, *ops: str, env: Mapping[str, str], entry: str = "dlsym") -> Running:
        return Running(self.argv(*ops, entry=entry), env)

    def hold(self, *ops: str, env: Mapping[str, str], entry: str = "dlsym") -> Running:
        """A process that ran `ops`, every one successfully, and now waits holding its state
        until `resume()` or `finish()`."""
        p = self.start(*ops, "wait", env=env, entry=entry)
        try:
            rows = p.wait_for()
        except BaseException:
            p.kill()
            raise
        if any(r["rc"] != "0" for r in rows):
            p.kill()
            raise AssertionError(f"cudaprobe {' '.join(ops)}: an operation failed: {rows}")
        return p


@dataclass
class Running:
    """A started cudaprobe.  `wait_for()` reads rows up to the next `wait` (the program then
    blocks on stdin), `resume()` lets it go on, `send(op)` runs one operation of a `stdin`
    script, `finish()` closes stdin and collects the rest.  As a context manager, it is killed
    on exit if still running."""

    argv: list[str]
    env: Mapping[str, str]
    rows: list[Row] = field(default_factory=list)
    pid: int = 0

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, env=dict(self.env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        header = self._line()
        if not header.startswith("cudaprobe pid="):
            self.kill()
            raise AssertionError(f"cudaprobe did not start: {header!r}")
        self.pid = int(header.split()[1].removeprefix("pid="))

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=60)
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(
                f"cudaprobe ended (exit {self.proc.returncode}) while a row was awaited; "
                f"rows {self.rows}, stderr {err!r}"
            )
        return line.rstrip("\n")

    def next_row(self) -> Row:
        row = parse_row(self._line())
        self.rows.append(row)
        return row

    def wait_for(self, op: str = "wait") -> list[Row]:
        """Read rows until the one whose word is `op`; returns the rows read."""
        start = len(self.rows)
        while self.next_row()["op"] != op:
            pass
        return self.rows[start:]

    def resume(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def send(self, op: str) -> Row:
        """One operation of a running `stdin` script, and its row."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(op + "\n")
        self.proc.stdin.flush()
        return self.next_row()

    def finish(self, timeout: float = 60) -> Result:
        out, err = self.proc.communicate(timeout=timeout)
        self.rows += [parse_row(line) for line in out.splitlines()]
        return self.result(err)

    def result(self, stderr: str = "") -> Result:
        return Result(self.pid, self.proc.returncode or 0, self.rows, stderr)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=60)

    def __enter__(self) -> Running:
        return self

    def __exit__(
        self, t: type[BaseException] | None, v: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()
