"""CUDA_DEVICE_MEMORY_LIMIT(_<i>) parsing (libvgpu/src/env.c) through a C driver that injects the
environment: sizes and suffixes, per-device overrides, and malformed values that must fall back to
another valid limit or to refusing memory (0), never to "no limit", with one message naming the
variable."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shimtest import build

MiB, GiB = 2**20, 2**30


@pytest.fixture(scope="module")
def unit_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("unit_env", tmp_path_factory.mktemp("unit_env"), ["env", "log", "size"])


def limits(driver: Path, *assignments: str) -> tuple[list[int | None], int, str]:
    res = subprocess.run([str(driver), *assignments], capture_output=True, text=True, check=True)
    lines = res.stdout.split("\n")
    vals: list[int | None] = []
    for line in lines[:4]:
        _, v = line.split()
        vals.append(None if v == "none" else int(v))
    malformed = int(lines[4].split()[1])
    return vals, malformed, res.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1048576", MiB),
        ("3000m", 3000 * MiB),
        ("3000M", 3000 * MiB),
        ("3g", 3 * GiB),
        ("3GiB", 3 * GiB),
        ("512k", 512 * 1024),
        ("1t", 2**40),
        ("0", None),  # 0 means no limit, as in HAMi
    ],
)
def test_valid_sizes_apply_to_every_device(unit_env: Path, value: str, expected: int) -> None:
    vals, malformed, err = limits(unit_env, f"CUDA_DEVICE_MEMORY_LIMIT={value}")
    assert vals == [expected] * 4
    assert malformed == 0 and err == ""


def test_no_variables_means_no_limit(unit_env: Path) -> None:
    assert limits(unit_env)[:2] == ([None] * 4, 0)


def test_per_device_value_overrides_the_general_one(unit_env: Path) -> None:
    vals, _, _ = limits(unit_env, "CUDA_DEVICE_MEMORY_LIMIT=4g", "CUDA_DEVICE_MEMORY_LIMIT_1=1g")
    assert vals == [4 * GiB, 1 * GiB, 4 * GiB, 4 * GiB]


@pytest.mark.parametrize("bad", ["12Q", "", "3 g", "-5", "3GB", "99999999999999999999", "1e9"])
def test_malformed_general_refuses_memory_and_names_the_variable(unit_env: Path, bad: str) -> None:
    vals, malformed, err = limits(unit_env, f"CUDA_DEVICE_MEMORY_LIMIT={bad}")
    assert vals == [0, 0, 0, 0]  # refuse device memory, never "no limit"
    assert malformed == 1
    assert err.count("\n") == 1  # one message
    assert f"CUDA_DEVICE_MEMORY_LIMIT='{bad}' is not a memory size" in err
    assert "valid:" in err


def test_malformed_general_keeps_valid_per_device_limits(unit_env: Path) -> None:
    vals, _, err = limits(
        unit_env, "CUDA_DEVICE_MEMORY_LIMIT=lots", "CUDA_DEVICE_MEMORY_LIMIT_2=2g"
    )
    assert vals == [0, 0, 2 * GiB, 0]
    assert "CUDA_DEVICE_MEMORY_LIMIT='lots'" in err


def test_malformed_per_device_falls_back_to_the_general_limit(unit_env: Path) -> None:
    vals, malformed, err = limits(
        unit_env, "CUDA_DEVICE_MEMORY_LIMIT=3g", "CUDA_DEVICE_MEMORY_LIMIT_0=12Q"
    )
    assert vals == [3 * GiB] * 4
    assert malformed == 1
    assert "CUDA_DEVICE_MEMORY_LIMIT_0='12Q' is not a memory size" in err
    assert "falls back to CUDA_DEVICE_MEMORY_LIMIT=3g" in err


def test_malformed_per_device_without_general_refuses_that_device(unit_env: Path) -> None:
    vals, _, err = limits(unit_env, "CUDA_DEVICE_MEMORY_LIMIT_3=big")
    assert vals == [None, None, None, 0]
    assert "device 3 refuses device memory" in err
