"""A process that ends (exit, SIGKILL, or exec into another program) loses its ledger rows in
the kernel itself, with no help from user space, and the clearing is reported as an event
with the bytes it still held."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from bpf_harness import Driver
from cudaprobe import CudaProbe

pytestmark = pytest.mark.bpf


def _clear_events(audit, pid: int) -> list:
    return [e for e in audit.poll_events(timeout_ms=50) if e.pid == pid and e.kind == "proc_clear"]


def test_exit_without_freeing_clears_the_rows(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc = cudaprobe.start("init", "ctx:1", "alloc:5000", "vmm:2097152:0",
                           "wait", "exit", env=driver.env)  # fmt: skip
    proc.wait_for()
    assert audit.snapshot()[proc.pid] == {1: 5000, 0: 2097152}
    proc.resume()
    assert proc.finish().returncode == 0
    assert proc.pid not in audit.snapshot()
    cleared = _clear_events(audit, proc.pid)
    assert [e.bytes for e in cleared] == [5000 + 2097152]


def test_sigkill_clears_the_rows(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    proc = cudaprobe.start("init", "primary:0", "alloc:777", "launch:3:1", "wait", env=driver.env)
    proc.wait_for()
    assert audit.snapshot()[proc.pid] == {0: 777}
    assert audit.launch_counts()[proc.pid] == 3
    proc.proc.send_signal(signal.SIGKILL)
    assert proc.finish().returncode == -signal.SIGKILL
    assert proc.pid not in audit.snapshot()
    assert proc.pid not in audit.launch_counts()
    assert [e.bytes for e in _clear_events(audit, proc.pid)] == [777]


def test_a_thread_exiting_does_not_clear_its_process(audit, driver: Driver) -> None:
    # python3 -c: allocate through ctypes, end a thread, then look at the ledger.
    code = (
        "import ctypes, threading, sys\n"
        "cu = ctypes.CDLL('libcuda.so.1')\n"
        "cu.cuInit(0)\n"
        "c = ctypes.c_void_p()\n"
        "assert cu.cuCtxCreate_v2(ctypes.byref(c), 0, 2) == 0\n"
        "p = ctypes.c_uint64()\n"
        "assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4242)) == 0\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        ["python3", "-c", code], env=driver.env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert sum(audit.snapshot()[proc.pid].values()) == 4242
    finally:
        proc.communicate("go\n", timeout=30)


def test_exec_clears_the_rows(audit, cudaprobe: CudaProbe, driver: Driver) -> None:
    # python allocates through ctypes, then execs sleep: same pid, the driver state is gone.
    code = (
        "import ctypes, os, sys\n"
        "cu = ctypes.CDLL('libcuda.so.1')\n"
        "cu.cuInit(0)\n"
        "c = ctypes.c_void_p()\n"
        "assert cu.cuCtxCreate_v2(ctypes.byref(c), 0, 2) == 0\n"
        "p = ctypes.c_uint64()\n"
        "assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(9999)) == 0\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "os.execv('/bin/sleep', ['sleep', '30'])\n"
    )
    proc = subprocess.Popen(
        ["python3", "-c", code], env=driver.env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert audit.snapshot()[proc.pid] == {2: 9999}
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 10
        while proc.pid in audit.snapshot() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid not in audit.snapshot()
        assert Path(f"/proc/{proc.pid}/exe").resolve().name == "sleep"  # same pid, new image
    finally:
        proc.kill()
        proc.wait()


def test_garbage_rows_of_dead_processes_are_collected(
    audit, cudaprobe: CudaProbe, driver: Driver
) -> None:
    proc = cudaprobe.start("init", "ctx:0", "alloc:10", "alloc:20", "wait", "exit", env=driver.env)
    proc.wait_for()
    rows = [k for k in audit._bpf[b"ptrs"] if k.pid == proc.pid]
    assert len(rows) == 2
    proc.resume()
    proc.finish()
    # The kernel cleared the ledger; the pointer rows can no longer match (their gen is gone).
    assert len([k for k in audit._bpf[b"ptrs"] if k.pid == proc.pid]) == 2
    assert audit.collect_garbage() >= 3  # two pointers and the context
    assert [k for k in audit._bpf[b"ptrs"] if k.pid == proc.pid] == []
    assert [k for k in audit._bpf[b"ctx_dev"] if k.pid == proc.pid] == []
