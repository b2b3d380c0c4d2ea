"""The simulated libraries export exactly the entry points of the X-macro lists in
libvgpu/include (nothing internal leaks; nothing listed is missing)."""

from __future__ import annotations

import subprocess

import sim_headercheck

from libvgpu.paths import sim_lib_dir


def _exported(lib: str) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(sim_lib_dir() / lib)],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines()
            if line.split()[1] in {"T", "t"}}


def test_libcuda_exports_the_cuda_list() -> None:
    assert _exported("libcuda.so.1") == set(sim_headercheck.function_names()["cuda"])


def test_libnvidia_ml_exports_the_nvml_list() -> None:
    expected = set(sim_headercheck.function_names()["nvml"]) | {"nvmlErrorString"}
    assert _exported("libnvidia-ml.so.1") == expected
