"""The README's commands, run as written by a new user (root, a fresh shell, no NVIDIA GPU):
each does what its line says. The one change to the text is the metrics port (a free one, so
that parallel test runs do not collide); the agent's state and the simulated GPU go to a
temporary folder through the variables their defaults read (GPUWARDEN_STATE_DIR,
XDG_RUNTIME_DIR)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from testbed.procs import free_ports

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def blocks(section: str) -> list[list[str]]:
    """The command lines of every ```sh block in a README section."""
    body = README.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [[line for line in b.splitlines() if line.strip()]
            for b in re.findall(r"```sh\n(.*?)```", body, re.S)]


def test_no_command_needs_sudo_or_a_path_into_the_venv() -> None:
    for section in ("Two commands", "First steps"):
        for block in blocks(section):
            for line in block:
                assert not line.startswith("sudo "), line
                assert ".venv/bin" not in line, line


@pytest.mark.skipif(os.geteuid() != 0, reason="setup links gpuwarden into /usr/local/bin as root")
def test_setup_puts_gpuwarden_on_a_plain_path() -> None:
    """A fresh shell finds `gpuwarden`: a link to a checkout's .venv (on a machine with several
    checkouts, the one whose setup ran last; on a fresh clone, this one)."""
    plain = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    found = shutil.which("gpuwarden", path=plain)
    assert found is not None, "gpuwarden is not on a plain PATH after scripts/setup.sh"
    target = os.path.realpath(found)
    assert target.endswith("/.venv/bin/gpuwarden") and os.access(target, os.X_OK), target
    if target == os.path.realpath(REPO / ".venv" / "bin" / "gpuwarden"):
        done = subprocess.run(["env", "-i", f"PATH={plain}", "bash", "-c", "gpuwarden --version"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("gpuwarden "), done.stderr


@pytest.mark.bpf
@pytest.mark.slow
def test_first_steps_work_and_enforce(tmp_path: Path) -> None:
    lines = [line for b in blocks("First steps") for line in b]
    assert any(line.startswith("gpuwarden run ") for line in lines)
    (port_n,) = free_ports(1)
    port = str(port_n)
    script = ["cd " + str(REPO)]
    for n, line in enumerate(lines):
        script.append(line.replace("9400", port))
        if not line.rstrip().endswith("&"):
            script.append(f'echo "== line {n} rc $?" >&2')
    script.append("wait")  # the agent, stopped by the README's own `kill %1`
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWARDEN_")
           and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env.update(GPUWARDEN_STATE_DIR=str(tmp_path / "state"), XDG_RUNTIME_DIR=str(tmp_path),
               PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
    done = subprocess.run(["bash", "-c", "\n".join(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    out, err = done.stdout, done.stderr
    rcs = {int(n): int(rc) for n, rc in re.findall(r"== line (\d+) rc (\d+)", err)}
    for n, line in enumerate(lines):
        if line.rstrip().endswith("&"):
            continue
        want = 3 if "exit 3" in line else 0
        assert rcs.get(n) == want, (line, rcs.get(n), out[-3000:], err[-3000:])
    said = re.search(r"rule (\S+), memory 3072 MiB, on violation (.*) \((\w+)\)", err)
    assert said and said.group(1) in README and said.group(3) == "enforce", err
    assert "holding 2048 MiB" in out
    assert re.search(r"out of memory after \d+ MiB of 2048 MiB", out)  # the 1 GiB slice
    trace = json.loads(out.strip().splitlines()[-1])  # bpf trace's last JSON line
    assert trace["type"] == "final", trace
    events = [json.loads(line) for line in (tmp_path / "state" / "audit.jsonl").open()]
    admitted = [e for e in events if e["event"] == "workload_admitted"]
    assert [e["mode"] for e in admitted] == ["enforce", "enforce"]
    assert all(e["rule"].split("+")[0] == "training" for e in admitted), admitted
    assert [list(e["limits_bytes"].values()) for e in admitted] == [[3 << 30], [1 << 30]]
    assert admitted[0]["gpucores"] == 30
