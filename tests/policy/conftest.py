"""Fixtures for the policy tests: compile in-memory text, write policy trees to tmp_path."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# This folder is named like the package it tests; pytest puts tests/ on sys.path, where
# `policy` would resolve to this folder (a namespace package) unless the repository root comes
# first.  `python -m pytest` has it already; the `pytest` script does not.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from policy import CompiledPolicy, LoadResult, load_texts  # noqa: E402

EXAMPLES = REPO / "examples" / "policies"
PODS = REPO / "examples" / "pods"


def _load(text: str, name: str = "t.gwp") -> LoadResult:
    return load_texts([(name, text)])


@pytest.fixture
def load() -> Callable[..., LoadResult]:
    """load(text) -> LoadResult of one in-memory file named t.gwp."""
    return _load


@pytest.fixture
def compile_ok() -> Callable[[str], CompiledPolicy]:
    """compile_ok(text) -> CompiledPolicy, failing the test with rendered errors otherwise."""

    def run(text: str) -> CompiledPolicy:
        result = _load(text)
        errors = [d.render() for d in result.errors]
        assert result.policy is not None, "\n".join(errors)
        return result.policy

    return run


@pytest.fixture
def codes() -> Callable[[str], list[str]]:
    """codes(text) -> the diagnostic codes of compiling text, in order."""
    return lambda text: [d.code for d in _load(text).diagnostics]


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """tree({"a.gwp": "...", "teams/b.gwp": "..."}) writes files under tmp_path."""

    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return tmp_path

    return write
