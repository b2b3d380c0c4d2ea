"""Fakes shared by the agent's tests."""

from __future__ import annotations

import pytest


class NoNvml:
    """An NVML library that fails to initialise: the agent runs without NVML."""

    def nvmlInit(self) -> None:
        raise OSError("no NVML in this test")


@pytest.fixture
def no_nvml() -> NoNvml:
    """Pass as Agent(..., nvml_lib=no_nvml)."""
    return NoNvml()
