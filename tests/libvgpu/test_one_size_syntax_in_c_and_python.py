"""One size syntax: libvgpu's C parser (src/size.c, used by the shim's CUDA_DEVICE_MEMORY_LIMIT
reader and by the simulated driver) and policy.units (policies, `run --gpumem`, `sim env
--memory`) accept and refuse the same texts and agree on every value; only the meaning of a bare
number is the caller's (bytes in the environment variables, MiB elsewhere)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shimtest import build

from policy.units import UnitError, parse_size_bytes

MiB, GiB = 2**20, 2**30
TABLE = [
    ("512M", 512 * MiB), ("512Mi", 512 * MiB), ("512MiB", 512 * MiB), ("512mib", 512 * MiB),
    ("1.5GiB", 1536 * MiB), ("3000m", 3000 * MiB), ("3g", 3 * GiB), ("1t", 2**40),
    ("0.5K", 512), ("2048B", 2048), ("1.25Gi", 1280 * MiB), ("0", 0), ("7", 7 * MiB),
    ("3GB", None), ("3 G", None), ("", None), ("-5", None), ("1e9", None), ("1.", None),
    (".5G", None), ("1.5", 1536 * 1024), ("0.3K", None), ("1.5B", None), ("12Q", None),
    ("3GiBs", None),
    ("99999999999999999999", None), ("16777216T", None), ("1.000000000000000000001G", None),
]


@pytest.fixture(scope="module")
def unit_size(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("unit_size", tmp_path_factory.mktemp("unit_size"), ["size"])


def c_parse(exe: Path, texts: list[str], bare_shift: int = 20) -> list[int | None]:
    out = subprocess.run([str(exe), *(f"{bare_shift}:{t}" for t in texts)], capture_output=True,
                         text=True, check=True).stdout.split()
    return [None if v == "bad" else int(v) for v in out]


def py_parse(text: str, bare: str = "MiB") -> int | None:
    try:
        return parse_size_bytes(text, bare=bare)
    except UnitError:
        return None


def test_the_table_in_both_languages(unit_size: Path) -> None:
    texts = [t for t, _ in TABLE]
    expected = [v for _, v in TABLE]
    assert [py_parse(t) for t in texts] == expected
    assert c_parse(unit_size, texts) == expected


def test_a_bare_number_is_what_the_caller_says(unit_size: Path) -> None:
    assert c_parse(unit_size, ["1048576", "1048576M"], bare_shift=0) == [MiB, 2**40]
    assert py_parse("1048576", bare="B") == MiB


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.kKmMgGtTiIbB ", max_size=8), min_size=1,
                max_size=30))
def test_random_texts_agree(unit_size: Path, texts: list[str]) -> None:
    texts = [t for t in texts if t and t.isprintable()]
    if texts:
        assert c_parse(unit_size, texts) == [py_parse(t) for t in texts]
