"""Suite-wide markers: `bpf` tests need root, BCC and tracefs; `gpu` tests need a real NVIDIA GPU.

A `bpf` test that cannot run skips with the reason, except where GPUWARDEN_REQUIRE_BPF=1 (CI),
where the same reason fails it: CI runs as root on a kernel with uprobes, so a skip there
would hide a broken install.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
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


# ---- the simulated GPU (libvgpu/sim) -------------------------------------------------------------
@dataclass(frozen=True)
class SimGpu:
    """A fresh simulated GPU: `env` is a full copy of os.environ with the sim's variables set
    (pass it to subprocesses), `state_path` its state file (created on first use)."""

    env: dict[str, str]
    state_path: Path


def _make_sim_gpu(tmp_path: Path, devices: int, memory: str, kernel_scale: float | None,
                  name: str) -> SimGpu:
    from libvgpu.sim import sim_env

    state_path = tmp_path / name
    env = dict(os.environ)
    env.pop("GPUWARDEN_SIM_KERNEL_SCALE", None)
    env.update(sim_env(state_path, devices=devices, memory=memory, kernel_scale=kernel_scale))
    return SimGpu(env=env, state_path=state_path)


@pytest.fixture
def sim_gpu(tmp_path: Path) -> SimGpu:
    """One simulated 80 GiB GPU, fresh per test."""
    return _make_sim_gpu(tmp_path, 1, "80GiB", None, "sim-gpu.state")


@pytest.fixture
def make_sim_gpu(tmp_path: Path) -> Callable[..., SimGpu]:
    """Factory for other shapes: make_sim_gpu(devices=2, memory="4GiB", kernel_scale=0.5)."""
    counter = iter(range(1_000_000))

    def make(devices: int = 1, memory: str = "80GiB", kernel_scale: float | None = None) -> SimGpu:
        return _make_sim_gpu(tmp_path, devices, memory, kernel_scale, f"sim-{next(counter)}.state")

    return make
