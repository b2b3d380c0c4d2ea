"""Benchmark: cost per call of the simulated driver's hot paths.

Usage: .venv/bin/python tests/benchmarks/bench_sim.py [N]
Compiles bench_sim_calls.c, runs it on a fresh simulated GPU (kernel scale 0) and prints ns per
call; results go to docs/benchmarks.md under "## libvgpu/sim".
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from cprog import compile_c  # noqa: E402

from libvgpu.sim import sim_env  # noqa: E402


def main() -> int:
    n = sys.argv[1] if len(sys.argv) > 1 else "200000"
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_c(HERE / "bench_sim_calls.c", Path(tmp), extra_flags=["-O2"])
        env = {**os.environ, **sim_env(Path(tmp) / "s.state", kernel_scale=0.0)}
        print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
              f"kernel {platform.release()}")
        done = subprocess.run([str(exe), n], env=env, text=True, capture_output=True)
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
