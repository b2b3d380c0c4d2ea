"""Our cuda_api.h / nvml_api.h have the same layouts, values and prototypes as NVIDIA's headers.

The `gpu` test runs on a host with the CUDA toolkit (cuda.h, nvml.h); the other two prove here
that the checker itself works: it passes on headers equal to ours and names a changed field.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import sim_headercheck as headercheck


def nvidia_include_dir() -> Path | None:
    candidates = [os.environ.get("GPUWARDEN_CUDA_INCLUDE", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent / "include"))
    candidates += ["/usr/local/cuda/include", "/usr/include"]
    for cand in candidates:
        if cand and (Path(cand) / "cuda.h").exists() and (Path(cand) / "nvml.h").exists():
            return Path(cand)
    return None


def _fake_nvidia(tmp_path: Path, ours: Path) -> Path:
    fake = tmp_path / "fake_nvidia"
    fake.mkdir()
    (fake / "cuda.h").write_text(f'#include "{ours / "cuda_api.h"}"\n')
    (fake / "nvml.h").write_text(f'#include "{ours / "nvml_api.h"}"\n')
    return fake


@pytest.mark.gpu
def test_layouts_values_and_prototypes_equal_nvidias(tmp_path: Path) -> None:
    include = nvidia_include_dir()
    if include is None:
        pytest.fail("cuda.h and nvml.h not found: set GPUWARDEN_CUDA_INCLUDE to the CUDA "
                    "toolkit's include directory")
    checked = headercheck.check_against(include, tmp_path)
    assert checked > 300


def test_checker_accepts_identical_headers(tmp_path: Path) -> None:
    checked = headercheck.check_against(_fake_nvidia(tmp_path, headercheck.INCLUDE), tmp_path)
    assert checked > 300


def test_checker_names_a_moved_field(tmp_path: Path) -> None:
    altered = tmp_path / "altered"
    shutil.copytree(headercheck.INCLUDE, altered)
    header = altered / "nvml_api.h"
    text = header.read_text()
    # Swap two fields of nvmlProcessUtilizationSample_t in the "NVIDIA" copy only.
    swapped = text.replace(
        "    unsigned int smUtil;\n    unsigned int memUtil;",
        "    unsigned int memUtil;\n    unsigned int smUtil;",
    )
    assert swapped != text
    header.write_text(swapped)
    with pytest.raises(AssertionError, match="offsetof nvmlProcessUtilizationSample_t smUtil"):
        headercheck.check_against(_fake_nvidia(tmp_path, altered), tmp_path)
