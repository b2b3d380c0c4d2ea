"""Suite-wide markers: `bpf` tests need root, BCC and tracefs; `gpu` tests need a real NVIDIA GPU.

A `bpf` test that cannot run skips with the reason, except where GPUWARDEN_REQUIRE_BPF=1 (CI),
where the same reason fails it: CI runs as root on a kernel with uprobes, so a skip there
would hide a broken install.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def bpf_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "eBPF tests need root"
    try:
        import bcc  # noqa: F401
    except ImportError as err:
        return f"BCC's python bindings are missing ({err}); run scripts/setup.sh as root"
    if not Path("/sys/kernel/tracing/uprobe_events").exists():
        return "tracefs is not mounted on /sys/kernel/tracing (scripts/setup.sh mounts it)"
    if not Path(f"/lib/modules/{os.uname().release}/build").exists():
        return f"no kernel headers at /lib/modules/{os.uname().release}/build"
    return None


def gpu_unavailable_reason() -> str | None:
    if not Path("/dev/nvidiactl").exists():
        return "no NVIDIA GPU on this machine (/dev/nvidiactl is absent)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bpf_reason = bpf_unavailable_reason()
    gpu_reason = gpu_unavailable_reason()
    require_bpf = os.environ.get("GPUWARDEN_REQUIRE_BPF") == "1"
    for item in items:
        if "bpf" in item.keywords and bpf_reason:
            if require_bpf:
                item.add_marker(pytest.mark.usefixtures("_bpf_required_but_unavailable"))
            else:
                item.add_marker(pytest.mark.skip(reason=bpf_reason))
        if "gpu" in item.keywords and gpu_reason:
            item.add_marker(pytest.mark.skip(reason=gpu_reason))


@pytest.fixture
def _bpf_required_but_unavailable() -> None:
    pytest.fail(f"GPUWARDEN_REQUIRE_BPF=1 but eBPF cannot run here: {bpf_unavailable_reason()}")
