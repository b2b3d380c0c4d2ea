"""Benchmark of the eBPF audit on the simulated driver, in one run, side by side:

  * per-launch cost: cuLaunchKernel in a C loop with no probes, with a bare entry uprobe
    (bench_bpf_bare.c: the trap alone), with the audit attached but launch counters off, and
    with launch counters on;
  * per alloc/free pair: cuMemAlloc_v2 + cuMemFree_v2 in a C loop, no probes vs the audit;
  * kernel memory of the audit's maps, from the kernel's own accounting (the `memlock:` line of
    each map's /proc/self/fdinfo entry; bpftool is not needed).

Run as root from the repository root (after `make -C libvgpu`):
    .venv/bin/python tests/benchmarks/bench_bpf.py [--launches N] [--pairs N] [--repeat R]
Prints a Markdown block for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from cprog import compile_c  # noqa: E402
from cudaprobe import SRC, parse  # noqa: E402

from bpf.audit import AuditProbe  # noqa: E402
from libvgpu.paths import sim_lib_dir  # noqa: E402
from libvgpu.sim import sim_env  # noqa: E402


def build_driver(out: Path) -> Path:
    """The CUDA test program (tests/progs/cudaprobe.c), optimised as a benchmark's driver."""
    return compile_c(SRC, out, extra_flags=["-O2"])


def measure(exe: Path, env: dict[str, str], op: str, field: str) -> float:
    out = subprocess.run([str(exe), "init", "primary:0", op],
                         env=env, capture_output=True, text=True, check=True).stdout  # fmt: skip
    _pid, rows = parse(out)
    (row,) = [r for r in rows if r["op"] == op]
    assert row["rc"] == "0", row
    return float(row[field])


def launch_ns(exe: Path, env: dict[str, str], n: int) -> float:
    return measure(exe, env, f"launch:{n}:1", "ns_per_launch")


def pair_ns(exe: Path, env: dict[str, str], n: int) -> float:
    return measure(exe, env, f"loop:{n}:4096", "ns_per_pair")


def map_memory(probe: AuditProbe) -> dict[str, int]:
    out = {}
    for name in (b"procs", b"ledger", b"ptrs", b"ctx_dev", b"ctx_stack", b"pending",
                 b"launches", b"kill_limits", b"cgroups", b"errors", b"events"):  # fmt: skip
        fd = probe._bpf[name].map_fd
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("memlock:"):
                out[name.decode()] = int(line.split()[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=200_000)
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(Path(tmp))
        env = dict(os.environ)
        env.update(sim_env(Path(tmp) / "sim.state", devices=1, kernel_scale=0.0))
        lib = sim_lib_dir() / "libcuda.so.1"
        r = args.repeat

        from bcc import BPF

        # Launch cost: one round = no probe, bare uprobe, audit counter; rounds interleave so
        # that other load on the machine hits every variant alike; best of the rounds.
        bare = BPF(src_file=str(Path(__file__).with_name("bench_bpf_bare.c")).encode())
        runs: dict[str, list[float]] = {"none": [], "bare": [], "off": [], "on": []}
        with AuditProbe(libs=[lib], launch_counters=False) as probe:
            audit_bpf = probe._bpf
            for _ in range(r):
                runs["off"].append(launch_ns(exe, env, args.launches))
                bare.attach_uprobe(name=bytes(lib), sym=b"cuLaunchKernel", fn_name=b"bare_enter")
                runs["bare"].append(launch_ns(exe, env, args.launches))
                bare.detach_uprobe(name=bytes(lib), sym=b"cuLaunchKernel")
                audit_bpf.attach_uprobe(name=bytes(lib), sym=b"cuLaunchKernel",
                                        fn_name=b"gw_launch_enter")  # fmt: skip
                runs["on"].append(launch_ns(exe, env, args.launches))
                audit_bpf.detach_uprobe(name=bytes(lib), sym=b"cuLaunchKernel")
            pairs_on = [pair_ns(exe, env, args.pairs) for _ in range(r)]
            probe.poll_events()
            lost = probe.lost_events()
            mem = map_memory(probe)
        bare.cleanup()
        for _ in range(r):
            runs["none"].append(launch_ns(exe, env, args.launches))
        pairs_off = [pair_ns(exe, env, args.pairs) for _ in range(r)]
        base_launch, bare_launch = min(runs["none"]), min(runs["bare"])
        off_launch, on_launch = min(runs["off"]), min(runs["on"])
        base_pair, on_pair = min(pairs_off), min(pairs_on)

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), platform.machine())  # fmt: skip
    print(f"Machine: {cpu}, {os.cpu_count()} CPUs, kernel {platform.release()}")
    print(f"Command: `{' '.join([sys.executable, *sys.argv])}`")
    print(f"Loops: {args.launches} launches, {args.pairs} alloc/free pairs; "
          f"best of {r} interleaved runs each; simulated libcuda, kernel scale 0\n")  # fmt: skip
    print("| measurement | no probes | audit attached | added |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| cuLaunchKernel, bare entry uprobe (baseline) | {base_launch:.0f} ns "
          f"| {bare_launch:.0f} ns | {bare_launch - base_launch:+.0f} ns |")  # fmt: skip
    print(f"| cuLaunchKernel, launch counters off | {base_launch:.0f} ns | {off_launch:.0f} ns "
          f"| {off_launch - base_launch:+.0f} ns |")  # fmt: skip
    print(f"| cuLaunchKernel, launch counters on | {base_launch:.0f} ns | {on_launch:.0f} ns "
          f"| {on_launch - base_launch:+.0f} ns |")  # fmt: skip
    print(f"| launch counter over the bare uprobe | | | {on_launch - bare_launch:+.0f} ns |")
    print(f"| cuMemAlloc_v2 + cuMemFree_v2 pair | {base_pair:.0f} ns | {on_pair:.0f} ns "
          f"| {on_pair - base_pair:+.0f} ns |")  # fmt: skip
    print(f"\nEvents lost during the pair loops (ring buffer 1 MiB, not drained while running): "
          f"{lost}\n")  # fmt: skip
    print("Kernel memory of the maps right after the run (memlock from /proc/self/fdinfo; "
          "ptrs, ctx_dev and ctx_stack grow on demand, the others are preallocated):\n")
    print("| map | bytes |")
    print("| --- | ---: |")
    for name, value in sorted(mem.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {value:,} |")
    print(f"| **total** | **{sum(mem.values()):,}** ({sum(mem.values()) / 2**20:.1f} MiB) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
