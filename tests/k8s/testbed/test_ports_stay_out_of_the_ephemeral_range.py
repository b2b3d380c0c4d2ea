"""The test bed's listening ports come from outside the kernel's ephemeral range, from which every
outgoing connection takes its local port: a port picked by binding port 0 and closed could be
taken by any client socket before its server binds it (a fresh-clone CI run lost the extender's
k8s tests to "address already in use")."""

from __future__ import annotations

import socket

import pytest
from testbed.procs import LISTEN_RANGE_FALLBACK, free_ports, listen_range


@pytest.mark.parametrize(
    ("ephemeral", "want"),
    [
        ("32768\t60999\n", (10000, 32767)),  # Linux's default: below it
        ("10000 20000", (20001, 65535)),  # low: above it
        ("1024 65000", LISTEN_RANGE_FALLBACK),  # no room either side
        ("not a range", LISTEN_RANGE_FALLBACK),
    ],
)
def test_listen_range_avoids_the_ephemeral_ports(ephemeral: str, want: tuple[int, int]) -> None:
    assert listen_range(ephemeral) == want


def test_free_ports_are_distinct_bindable_and_never_handed_out_twice() -> None:
    first, last = listen_range()
    a, b = free_ports(8), free_ports(8)
    assert len(set(a) | set(b)) == 16
    assert all(first <= p <= last for p in a + b), (first, last, a, b)
    for port in a + b:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
