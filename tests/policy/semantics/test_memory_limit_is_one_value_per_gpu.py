"""The memory limit is one typed value per GPU (`gpuwarden.limit.MemoryLimit`): resolved from the
effective rule and that GPU's size, caps included, with one meaning of 0 (admit nothing) and an
explicit "no limit"; and its one conversion to libvgpu's environment."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuwarden.limit import UNLIMITED, MemoryLimit, memory_limit, memory_limit_env
from policy import CompiledPolicy, EffectiveRule, ResourceRequest, Workload

MIB = 1 << 20
GIB = 1 << 30
V = "version 1\n"


def effective(p: CompiledPolicy, **req: int) -> EffectiveRule:
    return p.evaluate(Workload(request=ResourceRequest(**req)))


def test_percentage_gives_each_gpu_its_own_limit(
        compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = effective(compile_ok(V + 'rule "r" {\n  mode = audit\n}\n'), gpumem_percentage=25)
    assert memory_limit(e, 80 * GIB) == MemoryLimit(20 * GIB)
    assert memory_limit(e, 16 * GIB) == MemoryLimit(4 * GIB)


def test_unknown_gpu_size_keeps_the_mib_cap(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    """The size is unknown (the agent has no NVML): a MiB cap still bounds a percentage or a
    whole-GPU request; before, the fallback gave no limit at all."""
    p = compile_ok(V + 'rule "r" {\n  cap gpumem <= 8GiB deny\n}\n')
    assert memory_limit(effective(p, gpumem_percentage=50), None) == MemoryLimit(8 * GIB)
    whole = compile_ok(V + 'defaults {\n  gpumem = whole\n}\nrule "r" {\n'
                       '  cap gpumem <= 6GiB deny\n}\n')
    assert memory_limit(effective(whole), None) == MemoryLimit(6 * GIB)


def test_unknown_gpu_size_takes_the_smaller_absolute_size(
        compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = effective(compile_ok(V + 'rule "r" {\n  cap gpumem <= 50% deny\n}\n'), gpumem_mib=3000)
    assert memory_limit(e, None) == MemoryLimit(3000 * MIB)  # the 50% cannot apply unsized
    assert memory_limit(e, 4 * GIB) == MemoryLimit(2 * GIB)  # it does on a 4 GiB GPU


def test_unknown_gpu_size_without_an_absolute_size_is_unlimited(
        compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = effective(compile_ok(V + 'rule "r" {\n  mode = audit\n}\n'), gpumem_percentage=50)
    assert memory_limit(e, None) is not None and memory_limit(e, None).unlimited


def test_zero_admits_nothing_and_no_limit_is_explicit() -> None:
    assert MemoryLimit(0).exceeded_by(1) and not MemoryLimit(0).unlimited
    assert not UNLIMITED.exceeded_by(1 << 60) and UNLIMITED.bytes is None
    assert MemoryLimit(GIB).exceeded_by(GIB + 2, slack=1)
    assert not MemoryLimit(GIB).exceeded_by(GIB + 1, slack=1)
    assert UNLIMITED.within(80 * GIB) == 80 * GIB
    assert MemoryLimit(GIB).within(512 * MIB) == 512 * MIB
    with pytest.raises(ValueError, match="bytes >= 0"):
        MemoryLimit(-1)


def test_environment_never_says_no_limit_for_a_zero_limit() -> None:
    """libvgpu reads "0" as no limit (HAMi's contract): a limit of 0 bytes must not become it."""
    env = memory_limit_env([MemoryLimit(3 * GIB), MemoryLimit(0), UNLIMITED])
    assert env == {
        "CUDA_DEVICE_MEMORY_LIMIT": str(3 * GIB),
        "CUDA_DEVICE_MEMORY_LIMIT_0": str(3 * GIB),
        "CUDA_DEVICE_MEMORY_LIMIT_1": "1",
        "CUDA_DEVICE_MEMORY_LIMIT_2": "0",
    }
    with pytest.raises(ValueError, match="at least one GPU"):
        memory_limit_env([])
