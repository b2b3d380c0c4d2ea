"""Every `gpuwarden` command turns on Python's faulthandler first (gpuwarden/cli.py), so a fatal
signal raised inside a C extension of a long-running daemon (grpc, NVML, the BPF loader) writes
each thread's traceback to its stderr, the log an operator reads, instead of leaving only an
exit status."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# the command's main as a daemon runs it, with a second thread waiting as the daemons' loops do,
# then the process aborts as a C extension would
CRASH = """
import os, signal, sys, threading
from gpuwarden import cli
def handler(args):
    threading.Thread(target=threading.Event().wait, name="loop", daemon=True).start()
    os.kill(os.getpid(), signal.SIGABRT)
build = cli.build_parser
def parser():
    p = build()
    p.set_defaults(handler=handler)
    return p
cli.build_parser = parser
sys.exit(cli.main([]))
"""


def test_an_abort_in_a_command_dumps_every_thread_to_stderr() -> None:
    done = subprocess.run([sys.executable, "-c", CRASH], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert done.returncode == -signal.SIGABRT, (done.returncode, done.stderr)
    assert "Fatal Python error: Aborted" in done.stderr, done.stderr
    # the aborting thread's stack names the handler; the other thread is listed too
    assert "Current thread 0x" in done.stderr and "in handler" in done.stderr, done.stderr
    assert "Thread 0x" in done.stderr.replace("Current thread 0x", ""), done.stderr
