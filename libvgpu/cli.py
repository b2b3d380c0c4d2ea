"""`gpuwarden sim ...`: the simulated GPU from the command line.

  sim env    print the `export` lines that make a shell's programs use the simulated GPU
  sim smoke  run a small C workload on a fresh simulated GPU and show what real pynvml sees
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from libvgpu.paths import LIBVGPU_DIR, NotBuiltError, sim_lib_dir
from libvgpu.sim import (
    DEFAULT_MEMORY,
    DEFAULT_TIMESLICE_US,
    MAX_DEVICES,
    SIM_CTX_OVERHEAD,
    SimInputError,
    default_state_path,
    sim_env,
)
from policy.units import MIB

__all__ = ["register"]

SMOKE_SOURCE = LIBVGPU_DIR / "sim" / "demo" / "smoke_workload.c"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = subparsers.add_parser("sim", help="the simulated NVIDIA GPU (libvgpu/sim)",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)

    def usage(_args: argparse.Namespace) -> int:  # `gpuwarden sim` alone: help, exit 2
        sim.print_help()
        return 2

    sim.set_defaults(handler=usage)
    sub = sim.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")

    env = sub.add_parser("env", help="print export lines for the simulated GPU",
                         description="Print the environment that makes programs load the "
                         "simulated libcuda.so.1 and libnvidia-ml.so.1. Use: "
                         "eval \"$(gpuwarden sim env)\"")
    env.add_argument("--devices", default=None,
                     help=f"number of simulated GPUs, 1 to {MAX_DEVICES} (default 1)")
    env.add_argument("--memory", default=None, metavar="SIZE",
                     help="memory per GPU, e.g. 16GiB, 1.5GiB, 512M or 3000 (a bare number is "
                     f"MiB; default {DEFAULT_MEMORY})")
    env.add_argument("--state", default=None,
                     help=f"state file shared by the programs (default {default_state_path()})")
    env.add_argument("--timeslice", default=None, metavar="US",
                     help="how long, in microseconds, a process holds the simulated GPU while "
                     "another has kernels queued, as a real GPU alternates between contexts; 0: "
                     f"kernels run in launch order, whoever queued them (default "
                     f"{DEFAULT_TIMESLICE_US}); fixed when the state file is created")
    env.set_defaults(handler=cmd_env)

    smoke = sub.add_parser("smoke", help="run a small workload on the simulated GPU and show "
                           "what NVML sees")
    smoke.add_argument("--seconds", type=float, default=1.5,
                       help="how long the workload keeps the GPU half busy (default 1.5)")
    smoke.set_defaults(handler=cmd_smoke)


def _fail(message: str) -> int:
    print(f"gpuwarden sim: {message}", file=sys.stderr)
    return 2


def cmd_env(args: argparse.Namespace) -> int:
    from libvgpu.sim import existing_shape, parse_devices, parse_size, parse_timeslice

    state = Path(args.state) if args.state else default_state_path()
    devices = "1" if args.devices is None else args.devices
    memory = DEFAULT_MEMORY if args.memory is None else args.memory
    try:
        if args.state is not None and (not args.state.strip() or state.is_dir()):
            raise SimInputError(f"--state: {args.state!r} is not a file path; give the path of "
                                "a state file (it is created on first use)")
        if args.state is not None and not state.parent.is_dir():
            raise SimInputError(f"--state: {args.state!r}: the folder {state.parent} does not "
                                "exist; create it, or give a state file in an existing folder")
        ndev = parse_devices(devices, name="--devices")
        nbytes = parse_size(memory, name="--memory")
        timeslice = None if args.timeslice is None else parse_timeslice(args.timeslice,
                                                                         name="--timeslice")
        env = sim_env(state, devices=ndev, memory=nbytes, timeslice_us=timeslice,
                      ld_library_path="")
    except (SimInputError, NotBuiltError) as err:
        return _fail(str(err))
    existing = existing_shape(state)
    if existing is not None:
        shape, slice_us = existing[:2], existing[2]
        fixed = (f"created: remove it (rm {shlex.quote(str(state))}) when no program uses it any "
                 "more, or give another state file with --state PATH")
        asked = (ndev if args.devices is not None else shape[0],
                 nbytes if args.memory is not None else shape[1])
        if asked != shape:
            return _fail(f"the simulated GPU in {state} already exists with {_shape(*shape)}, "
                         f"and you asked for {_shape(*asked)}; its shape is fixed when it is "
                         + fixed)
        if timeslice is not None and timeslice != slice_us:
            return _fail(f"the simulated GPU in {state} already exists with a time slice of "
                         f"{slice_us} µs, and you asked for --timeslice {timeslice}; its time "
                         "slice is fixed when it is " + fixed)
        env.update(GPUWARDEN_SIM_DEVICES=str(shape[0]), GPUWARDEN_SIM_MEMORY=str(shape[1]),
                   GPUWARDEN_SIM_TIMESLICE=str(slice_us))
    have = (_shape(*existing[:2]) if existing else
            f"{_shape(ndev, nbytes)}, created on first use")
    print(f"# gpuwarden simulated GPU: {have}; state file: {state}")
    for name, value in env.items():
        if name == "LD_LIBRARY_PATH":
            print(f"export {name}={shlex.quote(value)}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}")
        else:
            print(f"export {name}={shlex.quote(value)}")
    return 0


def _shape(devices: int, nbytes: int) -> str:
    from policy.units import format_mib

    per = format_mib(nbytes // MIB) if nbytes % MIB == 0 else f"{nbytes} bytes"
    return f"{devices} × {per}" if devices > 1 else f"1 GPU of {per}"


def _compile_workload(out_dir: Path) -> Path:
    cc = shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (`cc`) on PATH; scripts/setup.sh installs one")
    exe = out_dir / "smoke_workload"
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", "-O1", "-Wall", "-Werror",
           f"-I{LIBVGPU_DIR / 'include'}", str(SMOKE_SOURCE), "-o", str(exe), "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling {SMOKE_SOURCE} failed:\n{done.stderr}")
    return exe


def _load_sim_nvml(env: dict[str, str]) -> Any:  # pynvml: untyped
    """Import pynvml bound to the simulated libnvidia-ml (loaded by path before pynvml looks
    it up by soname, so this process needs no LD_LIBRARY_PATH of its own)."""
    os.environ["GPUWARDEN_SIM_STATE"] = env["GPUWARDEN_SIM_STATE"]
    ctypes.CDLL(str(sim_lib_dir() / "libnvidia-ml.so.1"), mode=ctypes.RTLD_GLOBAL)
    import pynvml

    return pynvml


def _show(pynvml: Any, title: str, last_seen: int) -> None:
    print(f"\n== {title}")
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        util = pynvml.nvmlDeviceGetUtilizationRates(h)
        print(f"GPU {i}: {pynvml.nvmlDeviceGetName(h)}  {pynvml.nvmlDeviceGetUUID(h)}")
        print(f"  memory used {mem.used // MIB} MiB of {mem.total // MIB} MiB; "
              f"utilization {util.gpu}% (last second)")
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        try:
            found = pynvml.nvmlDeviceGetProcessUtilization(h, last_seen)
            samples = {s.pid: s.smUtil for s in found}
        except pynvml.NVMLError_NotFound:
            samples = {}
        if not procs:
            print("  processes: none")
        for p in procs:
            print(f"  process {p.pid}: {p.usedGpuMemory // MIB} MiB "
                  f"(incl. {SIM_CTX_OVERHEAD // MIB} MiB simulated context), "
                  f"SM {samples.get(p.pid, 0)}%")


def cmd_smoke(args: argparse.Namespace) -> int:
    if not 0.2 <= args.seconds <= 60:
        return _fail(f"--seconds: {args.seconds} is not valid; use 0.2 to 60")
    try:
        lib_dir = sim_lib_dir()
    except NotBuiltError as err:
        return _fail(str(err))
    if "pynvml" in sys.modules:
        return _fail("pynvml is already loaded in this process; run `gpuwarden sim smoke` alone")
    with tempfile.TemporaryDirectory(prefix="gpuwarden-smoke-") as tmp:
        env = {**os.environ, **sim_env(Path(tmp) / "sim.state", devices=1, memory="16GiB")}
        try:
            exe = _compile_workload(Path(tmp))
        except RuntimeError as err:
            return _fail(str(err))
        print(f"gpuwarden sim smoke: simulated driver from {lib_dir}")
        print("A C workload reaches libcuda.so.1 through dlopen/dlsym (like the CUDA runtime);")
        print("this process reads the same simulated GPU through real pynvml.\n")
        proc = subprocess.Popen([str(exe), str(int(args.seconds * 1000))], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            if line.strip() == "ready":
                break
            print(line, end="")
        else:
            proc.wait()
            return _fail(f"the workload exited early (status {proc.returncode})")
        pynvml = _load_sim_nvml(env)
        pynvml.nvmlInit()
        try:
            _show(pynvml, "what NVML shows while the workload holds its memory", 0)
            seen = int(time.time() * 1e6)
            proc.stdin.close()
            proc.wait(timeout=30)
            _show(pynvml, f"after the workload exited (status {proc.returncode})", seen)
        finally:
            pynvml.nvmlShutdown()
    print("\nAll numbers above come from the simulation: no GPU was used.")
    return 0 if proc.returncode == 0 else 1
