"""The layout the kubelet gives a ConfigMap volume, and its update: each version in a hidden
timestamped folder, `..data` a link to the current one, every key a link through `..data`; an
update writes a new folder and swaps `..data` atomically (rename of a new link over it), then
removes the old folder. For tests of what reads such a folder (the agent's policy reload)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["ConfigMapVolume"]


class ConfigMapVolume:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.generation = 0

    def write(self, files: dict[str, str]) -> None:
        """Publish a new version holding exactly `files` (key -> text)."""
        self.generation += 1
        ts = self.root / f"..2026_12_01_00_00_{self.generation:02d}.{os.getpid()}"
        ts.mkdir()
        for name, text in files.items():
            (ts / name).write_text(text)
        data = self.root / "..data"
        old = os.readlink(data) if data.is_symlink() else None
        (self.root / "..data_tmp").symlink_to(ts.name)
        os.replace(self.root / "..data_tmp", data)
        for name in files:
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")
        if old is not None:
            shutil.rmtree(self.root / old)
