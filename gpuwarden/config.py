"""The node and cluster settings every Kubernetes component reads (device plugin, extender,
webhook): one frozen `Settings`, loaded from a YAML file (a ConfigMap key in a cluster) with
HAMi's camelCase keys, then overridden by command-line flags.

Parsing is pure (`parse_settings(text, source)`); `load_settings` only reads the file. Every bad
value raises `SettingsError` naming the source, the key and what would be valid. The defaults
live in gpuwarden.resources (one definition).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from gpuwarden import resources as r

__all__ = [
    "FILE_KEYS",
    "POLICIES",
    "SchedulerPolicy",
    "Settings",
    "SettingsError",
    "load_settings",
    "parse_settings",
]

SchedulerPolicy = Literal["binpack", "spread"]
POLICIES: tuple[SchedulerPolicy, ...] = get_args(SchedulerPolicy)
MIG_SUPPORTED = ("none",)
MIG_KNOWN = ("none", "mixed", "single")
MAX_SPLIT = 1024
DEFAULT_REGION_ROOT = "/var/lib/gpuwarden/containers"


class SettingsError(ValueError):
    """A bad setting; the message names the source (file or flag), the key and what is valid."""


@dataclass(frozen=True, slots=True)
class Settings:
    device_split_count: int = r.DEVICE_SPLIT_COUNT
    device_memory_scaling: float = r.DEVICE_MEMORY_SCALING
    mig_strategy: str = r.MIG_STRATEGY
    disable_core_limit: bool = r.DISABLE_CORE_LIMIT
    default_mem_mib: int = r.DEFAULT_MEM_MIB
    default_cores: int = r.DEFAULT_CORES
    default_gpu_num: int = r.DEFAULT_GPU_NUM
    resource_names: r.ResourceNames = field(default_factory=r.ResourceNames)
    node_scheduler_policy: SchedulerPolicy = "binpack"  # parsed through _choice(POLICIES)
    gpu_scheduler_policy: SchedulerPolicy = "spread"
    scheduler_name: str = "gpuwarden-scheduler"
    # device plugin, per node: host paths mounted into every GPU container at the same path,
    # read-only unless suffixed ":rw" (the driver's files, as an NVIDIA container runtime adds)
    driver_mounts: tuple[str, ...] = ()
    # host folder holding one region folder per container (<pod uid>_<container>/)
    region_root: str = DEFAULT_REGION_ROOT


# ---- one checker per kind of value ----------------------------------------------------------

Check = Callable[[Any, str], Any]


def _int(lo: int, hi: int | None = None) -> Check:
    def check(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value.strip())
            else:
                raise SettingsError(f"{where}: {value!r} is not an integer; {_range(lo, hi)}")
        if value < lo or (hi is not None and value > hi):
            raise SettingsError(f"{where}: {value} is out of range; {_range(lo, hi)}")
        return int(value)

    return check


def _range(lo: int, hi: int | None) -> str:
    return f"use an integer from {lo} to {hi}" if hi is not None else f"use an integer >= {lo}"


def _positive_float(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        out = float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{where}: {value!r} is not a number; use a number above 0 "
                            "(1 = the real memory, above 1 = virtual memory)") from None
    if not math.isfinite(out) or out <= 0:
        raise SettingsError(f"{where}: {value!r} is not valid; use a number above 0 "
                            "(1 = the real memory, above 1 = virtual memory)")
    return out


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise SettingsError(f"{where}: {value!r} is not a boolean; use true or false")


def _choice(options: tuple[str, ...]) -> Check:
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in options:
            raise SettingsError(f"{where}: {value!r} is not valid; use one of "
                                f"{', '.join(options)}")
        return value

    return check


def _mig(value: Any, where: str) -> str:
    if isinstance(value, str) and value in MIG_KNOWN and value not in MIG_SUPPORTED:
        raise SettingsError(f"{where}: {value!r} is not supported yet; gpuwarden shares whole "
                            "GPUs only: use none (and leave MIG disabled on the GPUs)")
    return str(_choice(MIG_KNOWN[:1])(value, where))


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        raise SettingsError(f"{where}: {value!r} is not valid; use a non-empty name without "
                            "spaces (e.g. nvidia.com/gpu)")
    return value


def _abs_paths(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [p for p in value.split(",") if p]
    if not isinstance(value, (list, tuple)):
        raise SettingsError(f"{where}: {value!r} is not a list; use a list of absolute host "
                            "paths (or, as a flag, paths separated by commas)")
    out = []
    for p in value:
        path = p.removesuffix(":rw").removesuffix(":ro") if isinstance(p, str) else p
        if not isinstance(path, str) or not path.startswith("/") or ":" in path:
            raise SettingsError(f"{where}: {p!r} is not an absolute path; use host paths "
                                "such as /usr/lib/x86_64-linux-gnu/libcuda.so.1 (read-only), "
                                "with :rw to mount one writable")
        out.append(p)
    return tuple(out)


def _abs_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise SettingsError(f"{where}: {value!r} is not an absolute path; use a host folder "
                            f"such as {DEFAULT_REGION_ROOT}")
    return value


# ---- the keys ------------------------------------------------------------------------------
# file key -> (Settings field, checker); resource names go into Settings.resource_names.

_FIELDS: dict[str, tuple[str, Check]] = {
    "deviceSplitCount": ("device_split_count", _int(1, MAX_SPLIT)),
    "deviceMemoryScaling": ("device_memory_scaling", _positive_float),
    "migStrategy": ("mig_strategy", _mig),
    "disablecorelimit": ("disable_core_limit", _bool),
    "defaultMem": ("default_mem_mib", _int(0)),
    "defaultCores": ("default_cores", _int(0, 100)),
    "defaultGPUNum": ("default_gpu_num", _int(1, 64)),
    "nodeSchedulerPolicy": ("node_scheduler_policy", _choice(POLICIES)),
    "gpuSchedulerPolicy": ("gpu_scheduler_policy", _choice(POLICIES)),
    "schedulerName": ("scheduler_name", _name),
    "driverMounts": ("driver_mounts", _abs_paths),
    "regionRoot": ("region_root", _abs_path),
}
_RESOURCES: dict[str, str] = {
    "resourceName": "gpu",
    "resourceMem": "gpumem",
    "resourceMemPercentage": "gpumem_percentage",
    "resourceCores": "gpucores",
    "resourcePriority": "priority",
}
FILE_KEYS: tuple[str, ...] = (*_FIELDS, *_RESOURCES)
_BY_FIELD = {f: (key, check) for key, (f, check) in _FIELDS.items()}
_RES_BY_FIELD = {f: key for key, f in _RESOURCES.items()}


def _apply(base: Settings, values: Mapping[str, Any], where: Callable[[str], str],
           by_file_key: bool) -> Settings:
    changes: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, value in values.items():
        if by_file_key:
            if key in _FIELDS:
                fname, check = _FIELDS[key]
                changes[fname] = check(value, where(key))
            elif key in _RESOURCES:
                names[_RESOURCES[key]] = _name(value, where(key))
            else:
                raise SettingsError(f"{where(key)}: unknown setting; valid keys: "
                                    f"{', '.join(FILE_KEYS)}")
        elif key in _BY_FIELD:
            changes[key] = _BY_FIELD[key][1](value, where(key))
        elif key in _RES_BY_FIELD:
            names[key] = _name(value, where(key))
        else:
            valid = ", ".join([*_BY_FIELD, *_RES_BY_FIELD])
            raise SettingsError(f"{where(key)}: unknown setting; valid: {valid}")
    if names:
        changes["resource_names"] = replace(base.resource_names, **names)
    return replace(base, **changes)


def parse_settings(text: str, source: str = "<settings>",
                   base: Settings | None = None) -> Settings:
    """Settings from YAML text with HAMi's keys (an empty document gives the defaults)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise SettingsError(f"{source}{at}: not valid YAML ({problem}); expected a mapping of "
                            f"settings such as 'deviceSplitCount: 10'") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SettingsError(f"{source}: expected a mapping of settings such as "
                            f"'deviceSplitCount: 10', got {type(doc).__name__}")
    return _apply(base or Settings(), doc, lambda k: f"{source}: {k}", by_file_key=True)


def load_settings(path: str | Path | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """The defaults, then the file at `path` (if any), then `overrides` (Settings field names,
    or resource-name fields gpu/gpumem/...; None values are ignored: an unset flag)."""
    settings = Settings()
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise SettingsError(f"{path}: cannot read the settings file "
                                f"({err.strerror or err})") from None
        settings = parse_settings(text, str(path), settings)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    return _apply(settings, given, lambda k: f"flag {k.replace('_', '-')}", by_file_key=False)

