"""The Python mirror of the shared region (libvgpu/region.py) has the C layout
(libvgpu/include/vgpu_region.h + vgpu_compute.h): a C program generated from the ctypes
definition prints sizeof and offsetof of every field (recursively, through nested structs and
arrays) and every value must equal what ctypes computes."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest
from shimtest import CFLAGS

from libvgpu import region

C_NAMES = {
    region.RegionStruct: "struct vgpu_region",
    region.DeviceStruct: "struct vgpu_region_device",
    region.ProcStruct: "struct vgpu_region_proc",
    region.ComputeDevice: "struct vgpu_compute_device",
    region.ComputeContainer: "struct vgpu_compute_container",
    region.ComputeProc: "struct vgpu_compute_proc",
}


def field_paths(struct: type[ctypes.Structure], prefix: str = "") -> list[tuple[str, int, int]]:
    """(C member designator, offset, size) of every field, nested structs and arrays included
    (array elements 0 and 1, which pins the stride)."""
    out: list[tuple[str, int, int]] = []
    for name, ctype in struct._fields_:
        desc = getattr(struct, name)
        path = f"{prefix}{name}"
        out.append((path, desc.offset, desc.size))
        inner = ctype
        if issubclass(ctype, ctypes.Array):
            elem = ctype._type_
            for i in (0, 1):
                out.append(
                    (f"{path}[{i}]", desc.offset + i * ctypes.sizeof(elem), ctypes.sizeof(elem))
                )
            inner = elem
            path = f"{path}[1]"
            base = desc.offset + ctypes.sizeof(elem)
        else:
            base = desc.offset
        if issubclass(inner, ctypes.Structure):
            out.extend((p, base + o, s) for p, o, s in field_paths(inner, f"{path}."))
    return out


def test_every_field_offset_and_size_equals_c(tmp_path: Path) -> None:
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        '#include "vgpu_region.h"',
        "int main(void) {",
    ]
    expected = []
    for struct, cname in C_NAMES.items():
        lines.append(f'printf("sizeof %s %zu\\n", sizeof({cname}));'.replace("%s", cname, 1))
        expected.append(f"sizeof {cname} {ctypes.sizeof(struct)}")
        for path, off, size in field_paths(struct):
            lines.append(
                f'printf("{cname} {path} %zu %zu\\n", offsetof({cname}, {path}), '
                f"sizeof((({cname} *)0)->{path}));"
            )
            expected.append(f"{cname} {path} {off} {size}")
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    build = subprocess.run(
        ["cc", *CFLAGS, str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, (
        "a field of libvgpu/region.py is missing in vgpu_region.h/vgpu_compute.h:\n" + build.stderr
    )
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert got[:-1] == expected
    assert len(expected) > 100  # the walk really went through the nested structures


def test_c_has_no_field_python_lacks(tmp_path: Path) -> None:
    """Sizes match per struct and field offsets are contiguous up to padding: a C field that
    Python lacks would leave a hole bigger than alignment padding."""
    for struct in C_NAMES:
        end = 0
        for name, ctype in struct._fields_:
            desc = getattr(struct, name)
            assert desc.offset - end < ctypes.alignment(ctype), (struct.__name__, name)
            end = desc.offset + desc.size
        assert ctypes.sizeof(struct) - end < 8, struct.__name__


def test_constants_match_c(tmp_path: Path) -> None:
    src = tmp_path / "consts.c"
    src.write_text(
        '#include <stdio.h>\n#include "vgpu_region.h"\nint main(void) {\n'
        'printf("%llu %u %u %u %llu\\n", (unsigned long long)VGPU_REGION_MAGIC, '
        "VGPU_REGION_VERSION, VGPU_MAX_DEVICES, VGPU_MAX_PROCS, "
        "(unsigned long long)VGPU_LIMIT_NONE);\nreturn 0; }\n"
    )
    exe = tmp_path / "consts"
    subprocess.run(["cc", *CFLAGS, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in out] == [
        region.MAGIC,
        region.VERSION,
        region.MAX_DEVICES,
        region.MAX_PROCS,
        region.LIMIT_NONE,
    ]


@pytest.mark.parametrize("damage", ["magic", "version"])
def test_python_reader_refuses_a_damaged_region_with_a_region_error(tmp_path, damage) -> None:
    """Region.open of a corrupt file raises RegionError naming the file, never a BufferError
    from a map still referenced by the failed validation."""
    from libvgpu.region import REGION_BYTES, Region, RegionError

    path = tmp_path / "region"
    Region.create(path, [("GPU-00000000-0000-0000-0000-000000000001", 1 << 30)]).close()
    raw = bytearray(path.read_bytes())
    assert len(raw) == REGION_BYTES
    offset = 0 if damage == "magic" else 8  # u64 magic, then the u32 version
    raw[offset : offset + 4] = b"\xde\xad\xbe\xef"
    path.write_bytes(bytes(raw))
    with pytest.raises(RegionError, match=str(path)):
        Region.open(path)
