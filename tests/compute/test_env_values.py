"""The compute environment values are parsed strictly: only what docs/compute.md lists is valid."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("kind", "text", "want"),
    [
        ("pct", "0", "0"), ("pct", "30", "30"), ("pct", "100", "100"), ("pct", "30%", "30"),
        ("pct", "101", "malformed"), ("pct", "-1", "malformed"), ("pct", "", "malformed"),
        ("pct", "3O", "malformed"), ("pct", " 30", "malformed"), ("pct", "30.5", "malformed"),
        ("pct", "99999999999999999999", "malformed"), ("pct", "%", "malformed"),
        ("policy", "default", "0"), ("policy", "force", "1"), ("policy", "disable", "2"),
        ("policy", "FORCE", "1"), ("policy", "forced", "malformed"), ("policy", "", "malformed"),
        ("priority", "0", "0"), ("priority", "1", "1"), ("priority", "2", "malformed"),
        ("priority", "high", "malformed"), ("priority", "01", "malformed"),
        ("priority", "", "malformed"),
        ("wait", "sleep", "0"), ("wait", "yield", "1"), ("wait", "Yield", "1"),
        ("wait", "auto", "2"),
        ("wait", "spin", "malformed"), ("wait", "", "malformed"), ("wait", "yield ", "malformed"),
    ],
)
def test_value_is_parsed_or_refused(limiter_driver, kind: str, text: str, want: str) -> None:
    assert limiter_driver.run("parse", kind, text).strip() == want
