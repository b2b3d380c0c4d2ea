"""Checks that libvgpu/include/{cuda_api,nvml_api}.h agree with NVIDIA's cuda.h / nvml.h.

How: compile a probe against our headers that prints the size and field offsets of every struct
listed below and the value of every enum constant and #define our headers declare; turn those
numbers into `_Static_assert`s; compile the asserts against NVIDIA's headers.  The prototypes are
checked by redeclaring each of our functions (from the X-macro lists) after NVIDIA's header: the
compiler rejects a conflicting redeclaration.  NVIDIA's renaming macros are switched off
(`__CUDA_API_VERSION_INTERNAL`, `NVML_NO_UNVERSIONED_FUNC_DEFS`) so the ABI names are declared.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

INCLUDE = Path(__file__).resolve().parents[2] / "libvgpu" / "include"

# struct -> fields whose offsets must match (nested members written with a dot).
STRUCTS: dict[str, tuple[str, ...]] = {
    "CUuuid": ("bytes",),
    "CUmemLocation": ("type", "id"),
    "CUmemAllocationProp": (
        "type", "requestedHandleTypes", "location", "win32HandleMetaData", "allocFlags",
        "allocFlags.compressionType", "allocFlags.gpuDirectRDMACapable", "allocFlags.usage",
        "allocFlags.reserved",
    ),
    "CUmemAccessDesc": ("location", "flags"),
    "CUmemPoolProps": (
        "allocType", "handleTypes", "location", "win32SecurityAttributes", "maxSize", "usage",
        "reserved",
    ),
    "CUDA_ARRAY_DESCRIPTOR": ("Width", "Height", "Format", "NumChannels"),
    "CUDA_ARRAY3D_DESCRIPTOR": ("Width", "Height", "Depth", "Format", "NumChannels", "Flags"),
    "CUaccessPolicyWindow": ("base_ptr", "num_bytes", "hitRatio", "hitProp", "missProp"),
    "CUlaunchAttributeValue": ("cooperative", "clusterDim.x", "clusterDim.z", "priority"),
    "CUlaunchAttribute": ("id", "value"),
    "CUlaunchConfig": (
        "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ",
        "sharedMemBytes", "hStream", "attrs", "numAttrs",
    ),
    "CUDA_KERNEL_NODE_PARAMS_v2": (
        "func", "gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ",
        "sharedMemBytes", "kernelParams", "extra", "kern", "ctx",
    ),
    "CUdeviceptr": (),
    "CUmemGenericAllocationHandle": (),
    "nvmlMemory_t": ("total", "free", "used"),
    "nvmlMemory_v2_t": ("version", "total", "reserved", "free", "used"),
    "nvmlProcessInfo_v1_t": ("pid", "usedGpuMemory"),
    "nvmlProcessInfo_v2_t": ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"),
    "nvmlProcessInfo_t": ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"),
    "nvmlProcessUtilizationSample_t": (
        "pid", "timeStamp", "smUtil", "memUtil", "encUtil", "decUtil",
    ),
    "nvmlUtilization_t": ("gpu", "memory"),
    "nvmlValue_t": ("dVal", "uiVal", "ulVal", "ullVal", "sllVal"),
    "nvmlSample_t": ("timeStamp", "sampleValue", "sampleValue.uiVal"),
}

_ENUM_CONST = re.compile(r"^\s+((?:CU|CUDA|NVML)_[A-Z0-9_]+)\s*=", re.MULTILINE)
_DEFINE_CONST = re.compile(r"^#define\s+((?:CU|NVML)_[A-Z0-9_]+|nvmlMemory_v2)\s+\S", re.MULTILINE)
# Our own names (not in NVIDIA's headers) and pointer-valued macros.
_NOT_NVIDIA = {"CU_STREAM_LEGACY", "CU_STREAM_PER_THREAD", "NVML_STRUCT_VERSION"}


def constant_names(include_dir: Path = INCLUDE) -> list[str]:
    names: list[str] = []
    for header in ("cuda_api.h", "nvml_api.h"):
        text = (include_dir / header).read_text()
        names += _ENUM_CONST.findall(text) + _DEFINE_CONST.findall(text)
    return [n for n in dict.fromkeys(names) if n not in _NOT_NVIDIA]


def function_names(include_dir: Path = INCLUDE) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lib, header, macro in (
        ("cuda", "cuda_api_functions.h", "GW_CUDA_FN"),
        ("nvml", "nvml_api_functions.h", "GW_NVML_FN"),
        ("cuda_extra", "cuda_api_functions_extra.h", "GW_CUDA_FN"),  # the shim's, not the sim's
    ):
        text = (include_dir / header).read_text()
        out[lib] = re.findall(rf"^{macro}\((\w+),", text, re.MULTILINE)
    return out


def _compile(source: str, workdir: Path, name: str, args: list[str], run: bool) -> str:
    src = workdir / f"{name}.c"
    src.write_text(source)
    exe = workdir / name
    cmd = ["cc", "-std=gnu11", "-fmax-errors=0", *args, str(src)]
    cmd += ["-o", str(exe)] if run else ["-fsyntax-only"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    if not run:
        return ""
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def measure_ours(workdir: Path, include_dir: Path = INCLUDE) -> dict[str, int]:
    """Sizes, offsets and constant values as our headers define them."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "cuda_api.h"',
             '#include "nvml_api.h"', "int main(void) {"]
    for struct, fields in STRUCTS.items():
        lines.append(f'printf("sizeof {struct} %zu\\n", sizeof({struct}));')
        for field in fields:
            off = f"offsetof({struct}, {field})"
            lines.append(f'printf("offsetof {struct} {field} %zu\\n", {off});')
    for const in constant_names(include_dir):
        lines.append(f'printf("value {const} %lld\\n", (long long)({const}));')
    lines += ["return 0;", "}"]
    out = _compile("\n".join(lines), workdir, "probe_ours", [f"-I{include_dir}"], run=True)
    result: dict[str, int] = {}
    for line in out.splitlines():
        *key, value = line.split()
        result[" ".join(key)] = int(value)
    return result


def assert_source(ours: dict[str, int], include_dir: Path = INCLUDE) -> str:
    """A C file that includes NVIDIA's headers and static-asserts our numbers and prototypes."""
    lines = ["#define __CUDA_API_VERSION_INTERNAL 1", "#define NVML_NO_UNVERSIONED_FUNC_DEFS 1",
             "#include <stddef.h>", "#include <cuda.h>", "#include <nvml.h>"]
    for key, value in ours.items():
        kind, *rest = key.split()
        if kind == "sizeof":
            expr = f"sizeof({rest[0]})"
        elif kind == "offsetof":
            expr = f"offsetof({rest[0]}, {rest[1]})"
        else:
            expr = f"(long long)({rest[0]})"
        lines.append(f'_Static_assert({expr} == {value}, "{key}: ours is {value}");')
    funcs = function_names(include_dir)
    lines.append("#define GW_CUDA_FN(name, params) CUresult name params;")
    lines += [f'#include "{include_dir / "cuda_api_functions.h"}"']
    lines.append("#define GW_NVML_FN(name, params) nvmlReturn_t name params;")
    lines += [f'#include "{include_dir / "nvml_api_functions.h"}"']
    lines.append("const char *nvmlErrorString(nvmlReturn_t result);")
    assert funcs["cuda"] and funcs["nvml"]
    return "\n".join(lines) + "\n"


def check_against(nvidia_include: Path, workdir: Path, include_dir: Path = INCLUDE) -> int:
    """Raises AssertionError listing every mismatch; returns how many facts were checked."""
    ours = measure_ours(workdir, include_dir)
    source = assert_source(ours, include_dir)
    _compile(source, workdir, "assert_nvidia", [f"-I{nvidia_include}"], run=False)
    return len(ours) + sum(len(v) for v in function_names(include_dir).values())
