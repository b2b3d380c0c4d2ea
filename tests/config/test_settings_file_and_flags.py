"""gpuwarden.config: HAMi's keys from a YAML file, then flags; every bad value is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.config import FILE_KEYS, Settings, SettingsError, load_settings, parse_settings
from gpuwarden.resources import ResourceNames


def test_empty_file_gives_the_seed_defaults() -> None:
    s = parse_settings("", "cm.yaml")
    assert s == Settings()
    assert (s.device_split_count, s.device_memory_scaling, s.mig_strategy) == (10, 1.0, "none")
    assert (s.default_mem_mib, s.default_cores, s.default_gpu_num) == (5000, 0, 1)
    assert s.disable_core_limit is False
    assert (s.node_scheduler_policy, s.gpu_scheduler_policy) == ("binpack", "spread")
    assert s.resource_names == ResourceNames()


def test_every_hami_key_is_read() -> None:
    s = parse_settings(
        """
deviceSplitCount: 4
deviceMemoryScaling: 1.5
migStrategy: none
disablecorelimit: true
defaultMem: 0
defaultCores: 100
defaultGPUNum: 2
resourceName: example.com/vgpu
resourceMem: example.com/vgpumem
resourceMemPercentage: example.com/vgpumem-percentage
resourceCores: example.com/vgpucores
resourcePriority: example.com/vgpupriority
nodeSchedulerPolicy: spread
gpuSchedulerPolicy: binpack
schedulerName: my-scheduler
driverMounts: [/usr/lib/libcuda.so.1, '/dev/nvidia0:rw']
regionRoot: /srv/regions
""", "cm.yaml")
    assert s.device_split_count == 4 and s.device_memory_scaling == 1.5
    assert s.disable_core_limit and s.default_mem_mib == 0 and s.default_cores == 100
    assert s.default_gpu_num == 2
    assert s.resource_names == ResourceNames(
        "example.com/vgpu", "example.com/vgpumem", "example.com/vgpumem-percentage",
        "example.com/vgpucores", "example.com/vgpupriority")
    assert (s.node_scheduler_policy, s.gpu_scheduler_policy) == ("spread", "binpack")
    assert s.scheduler_name == "my-scheduler"
    assert s.driver_mounts == ("/usr/lib/libcuda.so.1", "/dev/nvidia0:rw")
    assert s.region_root == "/srv/regions"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("deviceSplitCount: 0", ["deviceSplitCount", "0", "1 to 1024"]),
        ("deviceSplitCount: 1025", ["deviceSplitCount", "1025", "1 to 1024"]),
        ("deviceSplitCount: ten", ["deviceSplitCount", "'ten'", "integer"]),
        ("deviceSplitCount: true", ["deviceSplitCount", "True", "integer"]),
        ("deviceMemoryScaling: 0", ["deviceMemoryScaling", "above 0"]),
        ("deviceMemoryScaling: -1.5", ["deviceMemoryScaling", "above 0"]),
        ("deviceMemoryScaling: .nan", ["deviceMemoryScaling", "above 0"]),
        ("deviceMemoryScaling: lots", ["deviceMemoryScaling", "'lots'", "number"]),
        ("migStrategy: mixed", ["migStrategy", "'mixed'", "not supported yet", "none"]),
        ("migStrategy: single", ["migStrategy", "'single'", "not supported yet"]),
        ("migStrategy: odd", ["migStrategy", "'odd'", "none"]),
        ("disablecorelimit: maybe", ["disablecorelimit", "'maybe'", "true or false"]),
        ("defaultMem: -1", ["defaultMem", "-1", ">= 0"]),
        ("defaultCores: 101", ["defaultCores", "101", "0 to 100"]),
        ("defaultGPUNum: 0", ["defaultGPUNum", "0", "1 to 64"]),
        ("resourceName: ''", ["resourceName", "non-empty"]),
        ("resourceMem: 'a b'", ["resourceMem", "without spaces"]),
        ("resourceCores: 5", ["resourceCores", "5"]),
        ("nodeSchedulerPolicy: random", ["nodeSchedulerPolicy", "'random'", "binpack, spread"]),
        ("gpuSchedulerPolicy: Spread", ["gpuSchedulerPolicy", "'Spread'", "binpack, spread"]),
        ("schedulerName: ''", ["schedulerName", "non-empty"]),
        ("driverMounts: lib/libcuda.so", ["driverMounts", "'lib/libcuda.so'", "absolute"]),
        ("driverMounts: {a: 1}", ["driverMounts", "not a list"]),
        ("driverMounts: ['/a:rx']", ["driverMounts", "'/a:rx'", ":rw"]),
        ("regionRoot: relative", ["regionRoot", "'relative'", "absolute"]),
        ("deviceSplitcount: 3", ["deviceSplitcount", "unknown setting", "deviceSplitCount"]),
        ("- deviceSplitCount", ["expected a mapping", "list"]),
        ("deviceSplitCount: [1", ["cm.yaml:1:", "not valid YAML"]),
    ],
)
def test_bad_value_names_the_file_key_and_what_is_valid(text: str, names: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        parse_settings(text, "cm.yaml")
    msg = str(err.value)
    assert msg.startswith("cm.yaml")
    for part in names:
        assert part in msg, msg


def test_flags_override_the_file_and_unset_flags_are_ignored(tmp_path: Path) -> None:
    f = tmp_path / "gpuwarden.yaml"
    f.write_text("deviceSplitCount: 4\ndefaultMem: 3000\n")
    s = load_settings(f, {"device_split_count": "8", "default_mem_mib": None, "gpu": "x.io/g"})
    assert s.device_split_count == 8 and s.default_mem_mib == 3000
    assert s.resource_names.gpu == "x.io/g"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"device_split_count": "0"}, ["flag device-split-count", "1 to 1024"]),
        ({"mig_strategy": "mixed"}, ["flag mig-strategy", "not supported yet"]),
        ({"split": 3}, ["flag split", "unknown setting", "device_split_count"]),
    ],
)
def test_bad_flag_is_named(overrides: dict[str, object], names: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(None, overrides)
    for part in names:
        assert part in str(err.value)


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"missing\.yaml: cannot read the settings file"):
        load_settings(tmp_path / "missing.yaml")


def test_every_file_key_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "deviceplugin.md").read_text()
    missing = [k for k in FILE_KEYS if f"`{k}`" not in doc]
    assert not missing, f"docs/deviceplugin.md does not describe {missing}"
