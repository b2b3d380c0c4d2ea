"""`gpuwarden deviceplugin` stops with exit status 2 and a message naming the setting before it
touches NVML, the API server or the kubelet."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwarden.cli import main


@pytest.mark.parametrize(("args", "text", "names"), [
    (["--device-split-count", "0"], "", ["flag device-split-count", "1 to 1024"]),
    (["--mig-strategy", "mixed"], "", ["flag mig-strategy", "not supported yet"]),
    ([], "deviceSplitCount: 4\nmigStrategy: mixed\n", ["config.yaml: migStrategy",
                                                         "not supported yet"]),
    ([], "splitCount: 4\n", ["config.yaml: splitCount", "unknown setting",
                              "deviceSplitCount"]),
    (["--driver-mount", "relative/libcuda.so"], "", ["flag driver-mounts", "absolute"]),
])
def test_bad_setting_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       args: list[str], text: str, names: list[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert main(["deviceplugin", "--config", str(config), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuwarden deviceplugin: ")
    for part in names:
        assert part in err, err


def test_missing_config_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deviceplugin", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: cannot read the settings file" in capsys.readouterr().err
