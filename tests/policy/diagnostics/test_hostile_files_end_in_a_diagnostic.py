"""Hostile policy files end in a diagnostic with file:line:col within a second, in bounded
memory, never a traceback or a hang: huge numbers, a regex repetition too large for `re`, a 1 MB
name, an include glob beside a symlink loop, a FIFO and a symlink to /dev/zero named *.gwp. A
1 MB token is cut in the rendered message."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from policy import load_policy

HEAD = 'version 1\n\nrule "a" {\n  match namespace == "x"\n'


def _file(body: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / "p.gwp").write_text(body)
    return make


def _glob_beside_a_loop(d: Path) -> None:
    (d / "p.gwp").write_text('version 1\n\ninclude "**/**/**/**/*.gwp"\n')
    (d / "sub").mkdir()
    (d / "sub" / "loop").symlink_to("..")


CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # name: (make the folder, expected code, expected text in the message)
    "size_with_400_zeros": (_file("version 1\n\ndefaults {\n  gpumem = 1" + "0" * 400
                                  + "GiB\n}\n"), "GW008", "too large"),
    "weight_of_5000_nines": (_file(HEAD + "  weight = " + "9" * 5000 + "\n}\n"), "GW008",
                             "out of range"),
    "regex_repetition_too_large": (_file(HEAD.replace('== "x"', '=~ "a{99999999999}"')
                                         + "  gpumem = 1GiB\n}\n"), "GW009",
                                   "invalid regular expression"),
    "unknown_key_of_1_mb": (_file("version 1\n\ndefaults {\n  " + "k" * 1_000_000
                                  + " = 1GiB\n}\n"), "GW005", "1000000 characters"),
    "identifier_of_1_mb": (_file(HEAD.replace('"x"', "x" * 1_000_000) + "}\n"), "GW001",
                           "1000000 characters"),
    "include_glob_beside_a_symlink_loop": (_glob_beside_a_loop, "GW016", "include cycle"),
    "fifo_named_gwp": (lambda d: os.mkfifo(d / "p.gwp"), "GW019", "not a regular file"),
    "symlink_to_dev_zero": (lambda d: (d / "p.gwp").symlink_to("/dev/zero"), "GW019",
                            "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_file_ends_in_a_diagnostic_within_a_second(tmp_path: Path, case: str) -> None:
    make, code, text = CASES[case]
    make(tmp_path)
    out: list[object] = []
    t0 = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(load_policy([tmp_path])), daemon=True)
    worker.start()
    try:
        worker.join(10)
        took = time.monotonic() - t0
        assert out, f"load_policy did not return within 10 s ({case})"
    finally:
        with contextlib.suppress(OSError):  # let a reader stuck on a FIFO go
            os.close(os.open(tmp_path / "p.gwp", os.O_WRONLY | os.O_NONBLOCK))
    result = out[0]
    assert took < 1.0, f"{case}: {took:.2f} s"
    assert not result.ok
    found = [d for d in result.diagnostics if d.code == code]
    assert found, [d.render() for d in result.diagnostics]
    rendered = found[0].render()
    assert rendered.startswith(f"{tmp_path / 'p.gwp'}:"), rendered[:200]
    line, col = rendered.split(":")[1:3]
    assert int(line) >= 1 and int(col) >= 1
    assert text in rendered
    assert len(rendered) < 2000, f"a {len(rendered)}-character diagnostic"


def test_policy_check_says_it_without_a_traceback(tmp_path: Path) -> None:
    CASES["regex_repetition_too_large"][0](tmp_path)
    res = subprocess.run([sys.executable, "-m", "gpuwarden", "policy", "check", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr + res.stdout
    assert "p.gwp:4:" in res.stdout + res.stderr
