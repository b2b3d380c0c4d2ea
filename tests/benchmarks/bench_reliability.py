"""Benchmark: the failure modes of issue 15 that are counted rather than timed.

Usage: .venv/bin/python tests/benchmarks/bench_reliability.py [KILLS] [RUNS]
On a fresh simulated GPU, with libvgpu preloaded and a 1 GiB limit:
- KILLS (default 400) processes are SIGKILLed 0.5-3 ms after they start on a fresh region, and
  each region is then tried by the next process (100 MiB): how many stay unusable;
- a process holding 700 MiB is SIGKILLed and left a zombie (not reaped), then RUNS (default 30)
  later processes allocate 500 MiB: how many fail;
- each hostile policy file of the diagnostics test is loaded: the slowest load, in ms.
Results go to docs/benchmarks.md under "## reliability".
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1])]  # the repository's packages before tests/ folders of the
sys.path += [str(HERE.parent), str(HERE.parent / "policy" / "diagnostics")]  # same names

from cudaprobe import CudaProbe, Running  # noqa: E402

from libvgpu.paths import shim_path  # noqa: E402
from libvgpu.sim import sim_env  # noqa: E402


def main() -> int:
    kills = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        probe = CudaProbe(tmp / "cudaprobe")
        env = {**os.environ, **sim_env(tmp / "sim.state", devices=1, memory="80GiB"),
               "LD_PRELOAD": str(shim_path()), "CUDA_DEVICE_MEMORY_LIMIT": "1g"}

        def region_env(region: Path) -> dict[str, str]:
            return {**env, "CUDA_DEVICE_MEMORY_SHARED_CACHE": str(region)}

        def works(region: Path, nbytes: int) -> bool:
            return probe.run("init", "primary:0", f"alloc:{nbytes}", env=region_env(region)).ok

        works(tmp / "warm", 1)  # the simulated GPU's state exists before any kill
        rng = random.Random(15)
        unusable = 0
        for i in range(kills):
            p = subprocess.Popen(probe.argv("init", "primary:0", "info"),
                                 env=region_env(tmp / f"r{i}"), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.0005, 0.003))  # the kill's moment is the variable
            p.kill()
            p.wait()
            unusable += not works(tmp / f"r{i}", 100 << 20)
        print(f"kills during region creation: {kills}, regions unusable afterwards: {unusable}")

        zombie: Running = probe.hold("init", "primary:0", f"alloc:{700 << 20}",
                                     env=region_env(tmp / "z"))
        os.kill(zombie.pid, signal.SIGKILL)
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.005)
        failed = sum(not works(tmp / "z", 500 << 20) for _ in range(runs))
        print(f"runs while a zombie held 700 MiB of the 1 GiB slice: {runs}, failed: {failed}")
        zombie.kill()  # reaps it

        from test_hostile_files_end_in_a_diagnostic import CASES

        from policy import load_policy
        slowest = (0.0, "")
        for name, (make, _, _) in sorted(CASES.items()):
            folder = tmp / f"policy-{name}"
            folder.mkdir()
            make(folder)
            t0 = time.perf_counter()
            load_policy([folder])
            slowest = max(slowest, (time.perf_counter() - t0, name))
        print(f"hostile policy files: {len(CASES)}, slowest load {slowest[0] * 1000:.0f} ms "
              f"({slowest[1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
