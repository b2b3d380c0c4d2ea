"""One GPU's memory limit, the one value every component passes on: `MemoryLimit`.

`memory_limit(rule, gpu_total_bytes)` resolves it for one GPU from the policy's effective rule
and that GPU's size; placement fits by it; the device plugin, the DRA driver and the agent write
it into the container's environment and region; the agent's decision core judges each GPU
against its own. Its one meaning of 0: `MemoryLimit(0)` admits nothing. No limit is `UNLIMITED`
(`bytes is None`), never 0.

The conversions, each written once:

- to the environment: `memory_limit_env` (libvgpu reads `CUDA_DEVICE_MEMORY_LIMIT[_<i>]` in
  bytes; there, as in HAMi, "0" means no limit, so `UNLIMITED` is written "0" and a limit of 0
  bytes is written "1", which admits no allocation of more than one byte, no context at all);
- to and from the region: `libvgpu.region` takes and gives `MemoryLimit.bytes` (None = no
  limit, 0 = admit nothing) and alone encodes it in the file (`encode_limit` / `decode_limit`:
  UINT64_MAX = no limit).

Pure, and light: it imports neither the policy package (the agent's decision core holds these
values and may not depend on the policy language) nor any I/O library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwarden.resources import MIB

if TYPE_CHECKING:
    from policy.model import EffectiveRule

__all__ = ["ENV_LIMIT", "MIB", "UNLIMITED", "MemoryLimit", "memory_limit", "memory_limit_env"]

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


def memory_limit(rule: EffectiveRule, gpu_total_bytes: int | None) -> MemoryLimit:
    """The rule's memory limit on one GPU of `gpu_total_bytes`: the request (MiB, a percentage,
    or the whole GPU) with the caps applied (a cap in the other unit than the request travels
    with the rule to be applied here), never above the GPU. None: the GPU's size is unknown, so
    only absolute sizes (the request's and the MiB cap) can apply; a rule with neither is then
    unlimited."""
    if gpu_total_bytes is None:
        known = [m * MIB for m in (rule.gpumem_mib, rule.gpumem_cap_mib) if m is not None]
        return MemoryLimit(min(known)) if known else UNLIMITED
    if gpu_total_bytes < 0:
        raise ValueError(f"gpu_total_bytes must be >= 0 (or None: unknown), got "
                         f"{gpu_total_bytes}")
    if rule.gpumem_mib is not None:
        limit = rule.gpumem_mib * MIB
    elif rule.gpumem_percentage is not None:
        limit = gpu_total_bytes * rule.gpumem_percentage // 100
    else:
        limit = gpu_total_bytes
    if rule.gpumem_cap_mib is not None:
        limit = min(limit, rule.gpumem_cap_mib * MIB)
    if rule.gpumem_cap_percentage is not None:
        limit = min(limit, gpu_total_bytes * rule.gpumem_cap_percentage // 100)
    return MemoryLimit(min(limit, gpu_total_bytes))


def memory_limit_env(limits: Sequence[MemoryLimit]) -> dict[str, str]:
    """A container's memory limit variables for its visible GPUs, in order: one per GPU, and the
    general one (the first GPU's) for programs that read only that."""
    if not limits:
        raise ValueError("memory_limit_env: a container needs at least one GPU's limit")
    env = {ENV_LIMIT: limits[0].env_value()}
    for i, limit in enumerate(limits):
        env[f"{ENV_LIMIT}_{i}"] = limit.env_value()
    return env
