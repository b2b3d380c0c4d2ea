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
# An exponent of at most two digits and 64 characters in all: every quantity the API server
# stores is far shorter, and reading "1e99999999" exactly would take minutes.
_QTY = re.compile(r"^([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|"
                  r"[eE][+-]?\d{1,2})?$")
_MAX_LEN = 64


def parse_quantity(text: Any, where: str) -> Fraction:
    """A Kubernetes quantity as an exact number; QuantityError naming `where` otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text.bit_length() > 4 * _MAX_LEN:  # str() of a huge int fails, and no count is one
            raise QuantityError(f"{where}: a number of {text.bit_length()} bits is not a "
                                f"Kubernetes quantity (at most {_MAX_LEN} characters)")
        return Fraction(text)
    s = text.strip() if isinstance(text, str) else ""
    m = _QTY.match(s) if 0 < len(s) <= _MAX_LEN else None
    if m is None:
        long = isinstance(text, str) and len(text) > _MAX_LEN
        shown = f"{text[:_MAX_LEN]!r}... ({len(text)} characters)" if long else repr(text)
        raise QuantityError(f"{where}: {shown} is not a Kubernetes quantity (e.g. 1Gi, 500Mi, "
                            f"10; at most {_MAX_LEN} characters, exponents of two digits)")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]
