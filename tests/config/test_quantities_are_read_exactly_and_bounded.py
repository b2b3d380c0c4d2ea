"""gpuwarden.quantity, the one Kubernetes-quantity parser (DRA capacities, claims, pod counts):
exact values, and a clear refusal naming where the value was for anything else, without hanging
on a huge exponent or a huge number."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from gpuwarden.quantity import QuantityError, parse_quantity


@pytest.mark.parametrize(("text", "value"), [
    ("8Gi", 8 << 30), ("1500M", 1_500_000_000), ("10", 10), ("1e3", 1000), ("250m", Fraction(1, 4)),
    ("1.5Gi", 3 << 29), (".5", Fraction(1, 2)), ("2E2", 200), (7, 7), ("30k", 30_000),
])
def test_quantities_are_read_exactly(text: object, value: Fraction) -> None:
    assert parse_quantity(text, "x") == value


@pytest.mark.parametrize("text", [
    "1e99999999", "1e123", "1" * 65, "a huge int", "", "3 Gi", "1GB", "Gi", None, True, 1.5,
])
def test_bad_quantities_are_refused_at_once_naming_where(text: object) -> None:
    if text == "a huge int":
        text = 10 ** 5000  # built here: pytest's test id would fail to print it
    t0 = time.monotonic()
    with pytest.raises(QuantityError, match=r"^spec\.devices\[0\]: .*not a Kubernetes quantity"):
        parse_quantity(text, "spec.devices[0]")
    assert time.monotonic() - t0 < 0.5
