"""Quantities in policy files: sizes, percentages, durations, each with a closed set of units."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DURATION_UNITS",
    "SIZE_UNITS",
    "Memory",
    "UnitError",
    "format_mib",
    "parse_duration",
    "parse_percent",
    "parse_size_mib",
    "split_quantity",
]

# Binary sizes only: a "GB" in a policy is almost always meant as GiB, and silently taking it
# as 10^9 would give a limit 7% off.  Unknown spellings get a hint toward the binary unit.
SIZE_UNITS: dict[str, float] = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1024 * 1024}
DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
_SIZE_LOOKALIKES = {
    "k": "KiB", "kb": "KiB", "ki": "KiB", "kib": "KiB",
    "m": "MiB", "mb": "MiB", "mi": "MiB", "mib": "MiB",
    "g": "GiB", "gb": "GiB", "gi": "GiB", "gib": "GiB",
    "t": "TiB", "tb": "TiB", "ti": "TiB", "tib": "TiB",
}
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


def parse_size_mib(text: str) -> int:
    """`40GiB` -> 40960.  Sizes must come to a whole number of MiB."""
    number, unit = split_quantity(text)
    if unit not in SIZE_UNITS:
        if unit == "":
            raise UnitError(f"size `{text}` has no unit", f"write `{text}MiB`")
        guess = _SIZE_LOOKALIKES.get(unit.lower())
        hint = f"did you mean `{_QUANTITY.fullmatch(text).group(1)}{guess}`? " if guess else ""  # type: ignore[union-attr]
        raise UnitError(f"unknown size unit `{unit}`",
                        hint + "sizes take KiB, MiB, GiB or TiB (binary units)")
    mib = number * SIZE_UNITS[unit]
    if mib != int(mib):
        raise UnitError(f"size `{text}` is not a whole number of MiB",
                        "use a smaller unit, e.g. MiB", code="GW008")
    return int(mib)


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


def format_mib(mib: int) -> str:
    """The shortest exact spelling: 40960 -> 40GiB, 5000 -> 5000MiB."""
    for unit in ("TiB", "GiB"):
        factor = int(SIZE_UNITS[unit])
        if mib and mib % factor == 0:
            return f"{mib // factor}{unit}"
    return f"{mib}MiB"
