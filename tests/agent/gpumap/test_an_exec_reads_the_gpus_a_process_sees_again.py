"""The GPUs a process sees (its CUDA_VISIBLE_DEVICES at exec) are cached per pid and start time;
an exec keeps both but may bring a new environment, so the agent reads it again after one."""

from __future__ import annotations

from pathlib import Path

from agent.model import Pid
from agent.sources import Sources

GPUS = ["GPU-0000", "GPU-1111"]


def _process(root: Path, pid: int, visible: str) -> None:
    d = root / str(pid)
    d.mkdir(exist_ok=True)
    (d / "environ").write_bytes(b"PATH=/bin\0CUDA_VISIBLE_DEVICES=" + visible.encode() + b"\0")


def test_an_exec_event_makes_the_agent_read_the_visible_gpus_again(tmp_path: Path) -> None:
    src = Sources(None, False, None, str(tmp_path))
    start_of = {Pid(42): 1000}.get
    _process(tmp_path, 42, "1")
    assert src._visible_gpus(42, GPUS, start_of) == ["GPU-1111"]
    _process(tmp_path, 42, "0")  # exec'd with another environment: same pid, same start time
    assert src._visible_gpus(42, GPUS, start_of) == ["GPU-1111"]  # cached until told
    src.forget_environment(Pid(42))
    assert src._visible_gpus(42, GPUS, start_of) == ["GPU-0000"]
