"""Read the defined function symbols of an ELF64 shared library's dynamic symbol table.

Enough ELF to tell whether a file is a CUDA driver library and which probed entry points it
exports, and to see two names at one address (attach one uprobe, not two).  Pure file
reading; no BCC.
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["ElfError", "dynamic_functions"]

_SHT_DYNSYM = 11
_STT_FUNC = 2
_STT_GNU_IFUNC = 10


class ElfError(ValueError):
    """The file is not a readable little-endian ELF64 shared object."""


def dynamic_functions(path: Path) -> dict[str, int]:
    """Map each defined function symbol in `path`'s .dynsym to its address (st_value)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ElfError(f"{path}: cannot read: {err.strerror}") from err
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file (expected a shared library such as libcuda.so.1)")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a little-endian 64-bit ELF file (only x86-64/arm64 supported)")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    for sh in sections:
        if sh[1] != _SHT_DYNSYM:
            continue
        sym_off, sym_size, link, entsize = sh[4], sh[5], sh[6], sh[9] or 24
        str_off = sections[link][4]
        out: dict[str, int] = {}
        for off in range(sym_off, sym_off + sym_size, entsize):
            name_off, info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", data, off)
            if shndx == 0 or value == 0 or (info & 0xF) not in (_STT_FUNC, _STT_GNU_IFUNC):
                continue
            end = data.index(b"\0", str_off + name_off)
            out[data[str_off + name_off : end].decode("ascii", "replace")] = value
        return out
    raise ElfError(f"{path}: has no dynamic symbol table (.dynsym): not a shared library")
