"""The test bed's pure parts, without a cluster: image archives, mountinfo and CRI log
parsing, and the message naming missing binaries."""

from __future__ import annotations

import json
import stat
import tarfile
from pathlib import Path

import pytest
from cprog import compile_c
from testbed import images
from testbed.assets import ASSET_BINARIES, find_assets
from testbed.node import parse_cri_log
from testbed.runfolder import filesystem_type, keep_logs, mounts_under

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
90 27 0:50 / /tmp/gwtb-1/etcd rw - tmpfs gwtb-etcd rw
91 27 0:51 / /tmp/gwtb-1/node-n/state/with\\040space rw - tmpfs shm rw
92 91 0:52 / /tmp/gwtb-1/node-n/state/with\\040space/deeper rw - tmpfs shm rw
93 27 0:53 / /tmp/gwtb-10/etcd rw - tmpfs gwtb-etcd rw
"""


def test_mounts_under_are_unescaped_and_deepest_first() -> None:
    assert mounts_under(Path("/tmp/gwtb-1"), MOUNTINFO) == [
        "/tmp/gwtb-1/node-n/state/with space/deeper",
        "/tmp/gwtb-1/node-n/state/with space",
        "/tmp/gwtb-1/etcd",
    ]


def test_filesystem_type_is_the_deepest_enclosing_mount() -> None:
    info = MOUNTINFO + "27 1 254:0 / / rw - ext4 /dev/vda rw\n"
    assert filesystem_type(Path("/tmp/gwtb-1/etcd/member"), info) == "tmpfs"
    assert filesystem_type(Path("/tmp/gwtb-1/node-n"), info) == "ext4"
    assert filesystem_type(Path("/tmp/gwtb-10"), info) == "ext4"


def test_logs_are_kept_where_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "gwtb-0123abcd"
    for log in ("logs/kube-apiserver.log", "node-n/logs/kubelet.log",
                "node-n/pod-logs/ns_p_uid/main/0.log", "node-n/kubelet/other.log"):
        (run / log).parent.mkdir(parents=True, exist_ok=True)
        (run / log).write_text(log)
    assert keep_logs(run) is None  # not asked
    monkeypatch.setenv("GPUWARDEN_TESTBED_KEEP_LOGS", str(tmp_path / "kept"))
    kept = keep_logs(run)
    assert kept == tmp_path / "kept" / "gwtb-0123abcd"
    files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*.log"))
    assert files == ["logs/kube-apiserver.log", "node-n/logs/kubelet.log",
                     "node-n/pod-logs/ns_p_uid/main/0.log"]


def test_cri_log_joins_partial_lines_and_keeps_streams_in_order() -> None:
    text = ("2026-01-01T00:00:00.1Z stdout P hel\n"
            "2026-01-01T00:00:00.2Z stdout F lo\n"
            "2026-01-01T00:00:00.3Z stderr F oops\n"
            "2026-01-01T00:00:00.4Z stdout F \n")
    assert parse_cri_log(text) == "hello\noops\n\n"


def _archive(image: images.Image) -> tuple[dict, dict, dict[str, tarfile.TarInfo]]:
    with tarfile.open(image.tarball) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config = json.load(tar.extractfile(manifest["Config"]))
        layer = tar.extractfile(manifest["Layers"][0])
        with tarfile.open(fileobj=layer) as lt:
            members = {m.name: m for m in lt.getmembers()}
    return manifest, config, members


def test_image_holds_the_program_its_libraries_and_the_loader(tmp_path: Path) -> None:
    src = tmp_path / "prog.c"
    src.write_text("#include <stdio.h>\nint main(void) { puts(\"x\"); return 0; }\n")
    exe = compile_c(src, tmp_path)
    deps = images.elf_dependencies(exe)
    assert any("libc.so" in d.name for d in deps) and any("ld-linux" in d.name for d in deps)
    image = images.build_image(tmp_path / "out", "gpuwarden.test/prog:2", {"/app/prog": exe},
                               entrypoint=["/app/prog"], with_busybox=False)
    manifest, config, members = _archive(image)
    assert manifest["RepoTags"] == ["gpuwarden.test/prog:2"]
    assert config["config"]["Entrypoint"] == ["/app/prog"]
    assert config["rootfs"]["diff_ids"][0].startswith("sha256:")
    assert stat.S_IMODE(members["app/prog"].mode) & 0o111
    for dep in deps:
        entry = members[str(dep).lstrip("/")]
        assert entry.isfile() and entry.size == dep.resolve().stat().st_size
    assert "bin/sh" not in members
    # as in any glibc-based image, glibc's libm is there for a library mounted in at run time
    libc = next(d for d in deps if d.name == "libc.so.6")
    assert members[str(libc.parent / "libm.so.6").lstrip("/")].isfile()


def test_busybox_image_links_its_applets(tmp_path: Path) -> None:
    _, config, members = _archive(images.busybox_image(tmp_path))
    assert members["bin/busybox"].isfile()
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "/bin/busybox"
    assert config["config"]["Cmd"] == ["sh"]
    assert stat.S_IMODE(members["tmp"].mode) == 0o1777


@pytest.mark.parametrize(("ref", "files", "error"), [
    ("Bad Ref", {}, "image reference 'Bad Ref'"),
    ("gpuwarden.test/x:1", {"relative/path": Path("/bin/true")}, "'relative/path'"),
    ("gpuwarden.test/x:1", {"/nothing": Path("/no/such/file")}, "/no/such/file is not a file"),
])
def test_bad_image_input_is_named(tmp_path: Path, ref: str, files: dict[str, Path],
                                  error: str) -> None:
    with pytest.raises((ValueError, FileNotFoundError), match=error.replace("(", r"\(")):
        images.build_image(tmp_path, ref, files, with_busybox=False)


def test_missing_binaries_are_named_with_the_folder(tmp_path: Path) -> None:
    (tmp_path / "kubelet").write_text("")
    (tmp_path / "kubelet").chmod(0o755)
    with pytest.raises(RuntimeError) as missing:
        find_assets({"KUBEBUILDER_ASSETS": str(tmp_path)})
    message = str(missing.value)
    assert f"KUBEBUILDER_ASSETS={tmp_path} lacks executable" in message
    assert all(b in message for b in ASSET_BINARIES if b != "kubelet")
    assert "kubelet," not in message
    with pytest.raises(RuntimeError, match="KUBEBUILDER_ASSETS is not set"):
        find_assets({})
