"""Container images built locally as docker-archive tarballs (no registry): a static pause
program compiled from a few lines of C, a busybox-static root file system, and images of given
host files with the shared libraries (and the dynamic loader) their ELF binaries need.  Import
them with `Node.import_image`; pods use `imagePullPolicy: Never`."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BUSYBOX_IMAGE",
    "PAUSE_IMAGE",
    "Image",
    "build_image",
    "busybox_image",
    "elf_dependencies",
    "pause_image",
]

PAUSE_IMAGE = "gpuwarden.test/pause:1"
BUSYBOX_IMAGE = "gpuwarden.test/busybox:1"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

PAUSE_C = r"""
#include <signal.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; }
int main(void) {
    signal(SIGINT, quit);
    signal(SIGTERM, quit);
    signal(SIGCHLD, reap);
    for (;;) pause();
}
"""


@dataclass(frozen=True)
class Image:
    """A docker-archive tarball holding one image named `ref`."""

    ref: str
    tarball: Path


@dataclass
class _Layer:
    """Files of one layer, by path in the image (no leading slash)."""

    files: dict[str, Path] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def add_file(self, path: str, host: Path) -> None:
        if not host.is_file():
            raise FileNotFoundError(f"image file {path!r}: {host} is not a file")
        self.files[path.strip("/")] = host

    def tar(self) -> bytes:
        buf = io.BytesIO()
        parents = set(self.dirs)
        for p in [*self.files, *self.links]:
            parts = p.split("/")[:-1]
            parents.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for d in sorted(parents):
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
                tar.addfile(info)
            for p, target in sorted(self.links.items()):
                info = tarfile.TarInfo(p)
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
                tar.addfile(info)
            for p, host in sorted(self.files.items()):
                data = host.read_bytes()
                info = tarfile.TarInfo(p)
                info.size = len(data)
                info.mode = host.stat().st_mode & 0o7777
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def _write_archive(out: Path, ref: str, layer: _Layer, entrypoint: Sequence[str],
                   cmd: Sequence[str]) -> Image:
    layer_tar = layer.tar()
    diff_id = hashlib.sha256(layer_tar).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": [PATH_ENV], "Entrypoint": list(entrypoint) or None,
                   "Cmd": list(cmd) or None, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "gpuwarden testbed"}],
    }, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref],
                            "Layers": [f"{diff_id}/layer.tar"]}]).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w") as tar:
        for name, data in ((f"{diff_id}/layer.tar", layer_tar), (config_name, config),
                           ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return Image(ref, out)


def pause_image(out_dir: Path) -> Image:
    """The sandbox (pause) image: a static C program that sleeps until SIGTERM/SIGINT."""
    src = out_dir / "pause.c"
    exe = out_dir / "pause"
    out_dir.mkdir(parents=True, exist_ok=True)
    src.write_text(PAUSE_C)
    cc = shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (`cc`) on PATH; scripts/setup.sh installs one")
    done = subprocess.run([cc, "-static", "-O2", "-Wall", "-Wextra", "-Werror", str(src),
                           "-o", str(exe)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"compiling the pause program failed:\n{done.stderr}")
    layer = _Layer()
    layer.add_file("pause", exe)
    return _write_archive(out_dir / "pause.tar", PAUSE_IMAGE, layer, ["/pause"], [])


def _busybox_layer() -> _Layer:
    busybox = Path(shutil.which("busybox") or "/bin/busybox")
    if not busybox.is_file():
        raise RuntimeError("busybox is not installed (scripts/setup.sh installs busybox-static)")
    if elf_dependencies(busybox):
        raise RuntimeError(f"{busybox} is dynamically linked: install busybox-static")
    layer = _Layer(dirs={"tmp", "proc", "sys", "dev", "etc", "var", "root"})
    layer.add_file("bin/busybox", busybox)
    listed = subprocess.run([str(busybox), "--list-full"], capture_output=True, text=True,
                            check=True).stdout.split()
    for applet in listed:
        if applet != "bin/busybox":
            layer.links[applet] = "/bin/busybox"
    return layer


def busybox_image(out_dir: Path) -> Image:
    """busybox-static with every applet linked (sh, echo, cat, sleep...); runs `sh`."""
    return _write_archive(out_dir / "busybox.tar", BUSYBOX_IMAGE, _busybox_layer(), [], ["sh"])


_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


def elf_dependencies(binary: Path) -> list[Path]:
    """The shared libraries and the dynamic loader `binary` loads (ldd); [] when static."""
    with binary.open("rb") as f:
        if f.read(4) != b"\x7fELF":
            return []
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    if done.returncode != 0:
        if "not a dynamic executable" in done.stdout + done.stderr:
            return []
        raise RuntimeError(f"ldd {binary} failed: {done.stderr.strip()}")
    missing = [line.strip() for line in done.stdout.splitlines() if "not found" in line]
    if missing:
        raise RuntimeError(f"{binary} needs libraries that are not found: {'; '.join(missing)}")
    return [Path(m.group(1)) for m in map(_LDD_LINE.search, done.stdout.splitlines()) if m]


# The libraries of glibc's runtime package that every glibc-based image carries (libc6): a
# library mounted into the container at run time (libvgpu, the driver's libcuda) may need one the
# image's own program does not (libm for the driver's and the shim's clock model).
GLIBC_RUNTIME = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1")


def _with_glibc_runtime(deps: list[Path]) -> list[Path]:
    """`deps`, and beside a libc.so.6 among them the rest of GLIBC_RUNTIME from its folder."""
    libc = next((d for d in deps if d.name == "libc.so.6"), None)
    if libc is None:
        return deps
    extra = [libc.parent / n for n in GLIBC_RUNTIME if (libc.parent / n).exists()]
    return deps + [e for e in extra if e not in deps]


def build_image(out_dir: Path, ref: str, files: Mapping[str, Path], *,
                entrypoint: Sequence[str] = (), cmd: Sequence[str] = (),
                with_busybox: bool = True) -> Image:
    """An image holding `files` ({path in the image: host file}) and, for each ELF among them,
    its shared libraries and the dynamic loader at the paths ldd names; busybox too unless
    `with_busybox=False`."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9._-]+", ref):
        raise ValueError(f"image reference {ref!r} must look like name/part:tag (lower case)")
    layer = _busybox_layer() if with_busybox else _Layer(dirs={"tmp", "proc", "sys", "dev"})
    for path, host in files.items():
        if not path.startswith("/"):
            raise ValueError(f"image path {path!r} (for {host}) must be absolute")
        layer.add_file(path, Path(host))
        for dep in _with_glibc_runtime(elf_dependencies(Path(host))):
            layer.links.pop(str(dep).strip("/"), None)
            layer.add_file(str(dep), dep.resolve())
    name = re.sub(r"[^A-Za-z0-9._-]", "_", ref)
    return _write_archive(out_dir / f"{name}.tar", ref, layer, entrypoint, cmd)
