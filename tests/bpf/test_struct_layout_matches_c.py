"""The structs and enums shared between the BPF programs and Python are defined once in C
(bpf/lib, bpf/include) and mirrored once in Python (bpf/structs.py, bpf/errors.py); this
compiles the C side and compares sizes, offsets and values.  It also checks the probes'
view of the CUDA ABI against libvgpu/include/cuda_api.h."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

from bpf_harness import CSRC
from cprog import compile_c

from bpf.errors import ERROR_NAMES
from bpf.structs import DEVICE_UNKNOWN, EVENT_FAILED, EVENT_KILLED, EventKind, GwEvent

REPO = Path(__file__).resolve().parents[2]


def _layout(tmp_path: Path) -> tuple[dict[str, int], list[str]]:
    flags = [f"-I{REPO / 'bpf'}", "-DWITH_CUDA_API"]
    exe = compile_c(CSRC / "layout.c", tmp_path, extra_flags=flags)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    values, other = {}, []
    for line in lines.splitlines():
        parts = line.split()
        if len(parts) == 3:
            values[f"{parts[0]} {parts[1]}"] = int(parts[2])
        else:
            other.append(line)
    return values, other


def test_event_struct_matches(tmp_path: Path) -> None:
    c, _ = _layout(tmp_path)
    assert c["sizeof gw_event"] == ctypes.sizeof(GwEvent)
    for name, _type in GwEvent._fields_:
        assert c[f"offsetof gw_event.{name}"] == getattr(GwEvent, name).offset, name
    assert len([k for k in c if k.startswith("offsetof gw_event.")]) == len(GwEvent._fields_)


def test_enums_match(tmp_path: Path) -> None:
    c, _ = _layout(tmp_path)
    assert c["value GW_DEVICE_UNKNOWN"] == DEVICE_UNKNOWN
    assert c["value GW_EVENT_KILLED"] == EVENT_KILLED
    assert c["value GW_EVENT_FAILED"] == EVENT_FAILED
    kinds = {k.removeprefix("value GW_KIND_"): v for k, v in c.items() if "GW_KIND_" in k}
    assert kinds == {k.name: k.value for k in EventKind}
    errs = {k.removeprefix("value GW_ERR_"): v for k, v in c.items() if "GW_ERR_" in k}
    assert errs.pop("_COUNT") == len(ERROR_NAMES)
    assert {name.lower(): v for name, v in errs.items()} == {
        n: i for i, n in enumerate(ERROR_NAMES)
    }


def test_cuda_abi_view_matches_libvgpu_header(tmp_path: Path) -> None:
    _, other = _layout(tmp_path)  # the _Static_asserts ran at compile time
    assert other == ["cuda-abi checked"]  # and no array format size differs
