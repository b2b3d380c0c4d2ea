"""Quantities: sizes, percentages, durations, each with a closed set of units.

This is the one size syntax of gpuwarden (docs/sizes.md), used by policy files, `gpuwarden run
--gpumem`, `gpuwarden sim env --memory` and pod requests; libvgpu's C reader
(libvgpu/common/size.c) accepts the same:

    <number>[<unit>]   number: digits with an optional decimal part (1.5GiB)
                       unit: K, Ki, KiB, M, Mi, MiB, G, Gi, GiB, T, Ti, TiB in any case (all
                       binary: 3000m = 3000 MiB, as HAMi writes it), or B for bytes
                       no unit: MiB; bytes only where a contract says so (the
                       CUDA_DEVICE_MEMORY_LIMIT and GPUWARDEN_SIM_MEMORY variables)

KB/MB/GB/TB are refused: they usually mean powers of 1000, and a limit read as the other would
be 5-10 % off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from gpuwarden.resources import MIB

__all__ = [
    "DURATION_UNITS",
    "MIB",
    "SIZE_UNITS",
    "Memory",
    "UnitError",
    "format_mib",
    "parse_duration",
    "parse_percent",
    "parse_size_bytes",
    "parse_size_mib",
    "split_quantity",
    "to_int",
]

# Binary sizes only: a "GB" in a policy is almost always meant as GiB, and silently taking it
# as 10^9 would give a limit 7% off.  Unknown spellings get a hint toward the binary unit.
SIZE_UNITS: dict[str, float] = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1024 * 1024}
# Every accepted spelling (lower-cased) -> bytes.
_SIZE_BYTES: dict[str, int] = {"b": 1}
for _i, _letter in enumerate("kmgt", start=1):
    for _spelling in (_letter, f"{_letter}i", f"{_letter}ib"):
        _SIZE_BYTES[_spelling] = 1 << (10 * _i)
SIZE_SYNTAX = ("a number with K, M, G or T (binary: 512M, 512Mi, 512MiB, 1.5GiB, 3000m) or "
               "B for bytes")
DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
_SIZE_LOOKALIKES = {"kb": "KiB", "mb": "MiB", "gb": "GiB", "tb": "TiB"}
_DURATION_LOOKALIKES = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m",
    "minute": "m", "minutes": "m", "hr": "h", "hour": "h", "hours": "h", "msec": "ms",
}
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z%]*)")


class UnitError(ValueError):
    """A quantity whose unit is unknown or missing; `code` says which diagnostic it becomes."""

    def __init__(self, message: str, hint: str | None = None, code: str = "GW007") -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory amount: `mib` (absolute), `percent` (of the GPU) or `whole` (the whole GPU)."""

    kind: str
    amount: int = 0

    def describe(self) -> str:
        if self.kind == "mib":
            return format_mib(self.amount)
        if self.kind == "percent":
            return f"{self.amount}%"
        return "whole"


def split_quantity(text: str) -> tuple[float, str]:
    m = _QUANTITY.fullmatch(text)
    if not m:
        raise UnitError(f"`{text}` is not a number with a unit")
    return float(m.group(1)), m.group(2)


def parse_size_bytes(text: str, *, bare: str = "MiB") -> int:
    """`1.5GiB` -> 1610612736 bytes.  A number without a unit is in `bare` ("MiB" or "B")."""
    m = _QUANTITY.fullmatch(text)
    if not m:
        raise UnitError(f"`{text}` is not a size", f"write {SIZE_SYNTAX}")
    number, unit = Fraction(m.group(1)), m.group(2)
    factor = _SIZE_BYTES.get((unit or bare).lower())
    if factor is None:
        guess = _SIZE_LOOKALIKES.get(unit.lower())
        hint = (f"did you mean `{m.group(1)}{guess}`? ({unit} would be powers of 1000; sizes "
                "here are binary) " if guess else "")
        raise UnitError(f"unknown size unit `{unit}`", hint + f"write {SIZE_SYNTAX}")
    size = number * factor
    if size.denominator != 1 or len(m.group(1).partition(".")[2]) > 18:
        raise UnitError(f"size `{text}` is not a whole number of bytes",
                        "use a smaller unit", code="GW008")
    if size >= 1 << 64:
        raise UnitError(f"size `{text}` is too large", "sizes go up to 16 EiB", code="GW008")
    return int(size)


def parse_size_mib(text: str) -> int:
    """`40GiB` -> 40960, `5000` -> 5000.  Sizes must come to a whole number of MiB."""
    size = parse_size_bytes(text)
    if size % (1 << 20):
        raise UnitError(f"size `{text}` is not a whole number of MiB",
                        "use a smaller unit, e.g. MiB", code="GW008")
    return size >> 20


def parse_percent(text: str) -> int:
    number, unit = split_quantity(text)
    if unit != "%":
        if unit == "":
            raise UnitError(f"percentage `{text}` has no unit", f"write `{text}%`")
        raise UnitError(f"`{text}` is not a percentage", "percentages are written like `50%`")
    if number != int(number):
        raise UnitError(f"percentage `{text}` is not a whole number", code="GW008")
    return int(number)


def parse_duration(text: str) -> float:
    number, unit = split_quantity(text)
    if unit not in DURATION_UNITS:
        if unit == "":
            raise UnitError(f"duration `{text}` has no unit", f"write `{text}s`")
        guess = _DURATION_LOOKALIKES.get(unit.lower())
        hint = f"did you mean `{unit}` -> `{guess}`? " if guess else ""
        raise UnitError(f"unknown duration unit `{unit}`", hint + "durations take ms, s, m or h")
    return number * DURATION_UNITS[unit]


def to_int(value: object) -> int:
    """int(value) for what a decided setting or a suite's YAML holds (a number, or its text);
    anything else is the TypeError int() itself raises, typed so callers need no ignore."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"expected a number, got {type(value).__name__} {value!r}")


def format_mib(mib: int) -> str:
    """The shortest exact spelling: 40960 -> 40GiB, 5000 -> 5000MiB."""
    for unit in ("TiB", "GiB"):
        factor = int(SIZE_UNITS[unit])
        if mib and mib % factor == 0:
            return f"{mib // factor}{unit}"
    return f"{mib}MiB"
