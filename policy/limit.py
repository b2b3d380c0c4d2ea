"""One GPU's memory limit, the one value every component passes on: `MemoryLimit`.

The policy resolves it for each GPU from the effective rule and that GPU's size
(`EffectiveRule.memory_limit`); placement fits by it; the device plugin, the DRA driver and the
agent write it into the container's environment and region; the agent judges each GPU against
its own. Its one meaning of 0: `MemoryLimit(0)` admits nothing. No limit is `UNLIMITED`
(`bytes is None`), never 0.

The conversions, each written here or in one named place:

- to the environment: `memory_limit_env` (libvgpu reads `CUDA_DEVICE_MEMORY_LIMIT[_<i>]` in
  bytes; there, as in HAMi, "0" means no limit, so `UNLIMITED` is written "0" and a limit of 0
  bytes is written "1", which admits no allocation of more than one byte, no context at all);
- to and from the region: `libvgpu.region` takes and gives `MemoryLimit.bytes` (None = no
  limit, 0 = admit nothing) and alone encodes it in the file (`encode_limit` / `decode_limit`:
  UINT64_MAX = no limit).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ENV_LIMIT", "MIB", "UNLIMITED", "MemoryLimit", "memory_limit_env"]

MIB = 1 << 20
ENV_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"  # and ENV_LIMIT_<i> for the i-th visible GPU


@dataclass(frozen=True, slots=True)
class MemoryLimit:
    """At most `bytes` of one GPU's memory (0: none at all), or no limit when `bytes` is None."""

    bytes: int | None

    def __post_init__(self) -> None:
        if self.bytes is not None and (isinstance(self.bytes, bool) or self.bytes < 0):
            raise ValueError(f"a memory limit is a number of bytes >= 0, or None for no limit; "
                             f"got {self.bytes!r}")

    @classmethod
    def of_mib(cls, mib: int) -> MemoryLimit:
        return cls(mib * MIB)

    @property
    def unlimited(self) -> bool:
        return self.bytes is None

    def within(self, gpu_total_bytes: int) -> int:
        """The most it lets a workload hold on a GPU of `gpu_total_bytes`."""
        return gpu_total_bytes if self.bytes is None else min(self.bytes, gpu_total_bytes)

    def exceeded_by(self, used: int, slack: int = 0) -> bool:
        """Whether `used` bytes are above the limit by more than `slack` (never, unlimited)."""
        return self.bytes is not None and used > self.bytes + slack

    def env_value(self) -> str:
        """The value of `CUDA_DEVICE_MEMORY_LIMIT[_<i>]` that says this limit to libvgpu."""
        if self.bytes is None:
            return "0"  # HAMi's "no limit"
        return str(self.bytes or 1)  # "0" would say no limit; 1 byte admits next to nothing

    def describe(self) -> str:
        if self.bytes is None:
            return "no limit"
        if self.bytes % MIB == 0:
            return f"{self.bytes // MIB} MiB"
        return f"{self.bytes} bytes"


UNLIMITED = MemoryLimit(None)


def memory_limit_env(limits: Sequence[MemoryLimit]) -> dict[str, str]:
    """A container's memory limit variables for its visible GPUs, in order: one per GPU, and the
    general one (the first GPU's) for programs that read only that."""
    if not limits:
        raise ValueError("memory_limit_env: a container needs at least one GPU's limit")
    env = {ENV_LIMIT: limits[0].env_value()}
    for i, limit in enumerate(limits):
        env[f"{ENV_LIMIT}_{i}"] = limit.env_value()
    return env
