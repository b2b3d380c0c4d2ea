"""The agent's fast region reader agrees with libvgpu.region and refuses foreign, truncated and
corrupted files with a message naming the file and what is wrong."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from agent.regions import RegionReader
from libvgpu import region as lr

UUID = "GPU-00000000-0000-0000-0000-0000000000aa"


def test_reads_limits_usage_and_active_slots(tmp_path: Path) -> None:
    path = tmp_path / "r.region"
    with lr.Region.create(path, [(UUID, 1 << 30)]) as r:
        # fill two slots the way a shim would (pid, start time, state, usage)
        mm_struct = lr.RegionStruct.from_buffer(r._mm)  # test-only poke at the mapping
        for i, (pid, st) in ((5, (os.getpid(), 11)), (900, (1, 22))):
            mm_struct.procs[i].pid, mm_struct.procs[i].start_time = pid, st
            mm_struct.procs[i].state = lr.PROC_ACTIVE
        mm_struct.procs[6].pid, mm_struct.procs[6].state = 77, lr.PROC_CLAIMING
        mm_struct.devices[0].used_bytes = 123
        del mm_struct
        reader = RegionReader(path)
        got = reader.read()
        assert got.used == {UUID: 123} and got.limits == {UUID: 1 << 30}
        assert got.procs == {os.getpid(): 11, 1: 22}
        r.set_memory_limit(UUID, None)
        assert reader.read(with_procs=False).limits == {UUID: None}
        reader.close()


@pytest.mark.parametrize(("content", "message"), [
    (b"", "corrupt region: 0 bytes"),
    (b"\0" * lr.REGION_BYTES, "bad magic 0x0"),
    (lr.MAGIC.to_bytes(8, "little") + (9).to_bytes(4, "little") + b"\0" * 100,
     "region version 9"),
])
def test_foreign_files_are_refused_clearly(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.region"
    path.write_bytes(content)
    with pytest.raises(lr.RegionError) as err:
        RegionReader(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_corruption_after_open_is_seen_on_read(tmp_path: Path) -> None:
    path = tmp_path / "r.region"
    lr.Region.create(path, [(UUID, 1 << 20)]).close()
    reader = RegionReader(path)
    with path.open("r+b") as f:
        f.write(b"\xff" * 8)
    with pytest.raises(lr.RegionError, match="corrupt region: magic 0xffffffffffffffff"):
        reader.read()
    reader.close()
    assert ctypes.sizeof(lr.RegionStruct) == lr.REGION_BYTES
