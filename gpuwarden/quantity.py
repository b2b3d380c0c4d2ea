"""Kubernetes quantities ("8Gi", "1500M", "10", "1e3", "250m") read exactly: one parser for
every component that reads them from API objects (DRA capacities, claims' requests)."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

__all__ = ["QuantityError", "parse_quantity"]


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message names where it was found."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, int | Fraction] = {
    "": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QTY = re.compile(r"^([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|"
                  r"[eE][+-]?\d+)?$")


def parse_quantity(text: Any, where: str) -> Fraction:
    """A Kubernetes quantity as an exact number; QuantityError naming `where` otherwise."""
    m = _QTY.match(str(text).strip()) if isinstance(text, (str, int)) else None
    if m is None or isinstance(text, bool):
        raise QuantityError(f"{where}: {text!r} is not a Kubernetes quantity (e.g. 1Gi, 500Mi, "
                            "10)")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]
