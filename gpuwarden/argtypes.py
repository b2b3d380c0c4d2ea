"""argparse value types shared by the commands: a bad flag value is refused by argparse, with
the flag's name and what would be valid (exit status 2), never a traceback later nor a NaN that
slips through every comparison."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["count", "port", "seconds"]


def port(text: str) -> int:
    """A TCP port, 0..65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use 0..65535 (0: any free "
                                         "port)")
    return value


def count(low: int, high: int, what: str) -> Callable[[str], int]:
    """A whole number `low`..`high` of `what` (named in the message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what}: use "
                                             f"{low}..{high}")
        return value

    parse.__name__ = "count"  # argparse names the type in some messages
    return parse


def seconds(minimum: float = 0.0, *, zero_ok: bool = False,
            maximum: float | None = None) -> Callable[[str], float]:
    """A finite number of seconds above `minimum` (or equal to it with zero_ok), at most
    `maximum`."""
    low = f">= {minimum:g}" if zero_ok else f"> {minimum:g}"
    valid = low if maximum is None else f"{low} and <= {maximum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = (math.isfinite(value) and (value >= minimum if zero_ok else value > minimum)
              and (maximum is None or value <= maximum))
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds {valid} "
                                             "(e.g. 1 or 0.5)")
        return value

    parse.__name__ = "seconds"  # argparse names the type in some messages
    return parse
