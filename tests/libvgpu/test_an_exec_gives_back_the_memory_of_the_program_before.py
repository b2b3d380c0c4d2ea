"""exec() keeps a process's pid and start time but runs no atexit handler, so the slot its
program held in the region stayed, counting memory the driver gave back with the program (its
files are opened close-on-exec). The shim in the new program now frees that slot when it claims
its own: the container is not held under its limit by memory nobody holds."""

from __future__ import annotations

import subprocess

import execafter
from cudaprobe import GiB, MiB, parse

from libvgpu.region import Region


def test_the_program_after_an_exec_is_not_charged_the_memory_of_the_one_before(shim) -> None:
    run = shim("2g")
    before = 1200 * 1000 * 1000
    argv = run.probe.argv(*run.script("alloc:1200000000", "info", "wait"))
    p = subprocess.Popen(execafter.argv(before, "keep", "-", *argv), env=run.env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline() == "allocated\n"  # the first program, through the shim
        lines = []
        while len(lines) < 5:  # the header, init, primary, alloc, info rows
            line = p.stdout.readline()
            assert line, f"the probe ended early: {lines}"
            lines.append(line)
        pid, rows = parse("".join(lines))
        assert pid == p.pid  # the same process, a new program
        _init, _primary, alloc, info = rows[:4]
        # with the first program's 1.2 GB and context still counted, 1.2 GB more would not fit
        assert alloc["rc"] == "0", rows
        ctx = 300 * MiB  # the simulated driver's context
        assert int(info["free"]) == 2 * GiB - ctx - 1_200_000_000, rows
        with Region.open(run.region_path) as region:
            dev = region.snapshot().devices[0]
            assert [pu.pid for pu in dev.processes] == [p.pid]
            assert dev.used_bytes == ctx + 1_200_000_000
    finally:
        p.kill()
        p.wait()
