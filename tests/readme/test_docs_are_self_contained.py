"""The repository's documentation stands on its own: no file cites a design brief that is not
in the repository, every docs/ or examples/ path the docs name exists, and docs/policy.md says
what the agent does on `kill after N` (SIGTERM at once, SIGKILL after N), as decide() does."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from agent.decide import AgentPolicy, decide
from agent.model import ActionKind, GpuUuid, Pid, Response, Rule, Snapshot, Workload, WorkloadKey
from gpuwarden.limit import MemoryLimit

REPO = Path(__file__).resolve().parents[2]


def tracked_texts() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    out = {}
    for name in names:
        try:
            out[name] = (REPO / name).read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return out


def test_no_file_cites_a_design_brief_outside_the_repository() -> None:
    me = str(Path(__file__).relative_to(REPO))
    cites = [name for name, text in tracked_texts().items()
             if name != me and "DESIGN.md" in text]
    assert not cites, cites


def test_every_repository_path_the_docs_name_exists() -> None:
    docs = {n: t for n, t in tracked_texts().items()
            if n == "README.md" or (n.startswith("docs/") and n.endswith(".md"))}
    missing = []
    for name, text in docs.items():
        for path in re.findall(r"`((?:docs|examples)/[\w./-]+\.(?:md|json|ya?ml|py|gwp))`", text):
            if not (REPO / path).exists():
                missing.append((name, path))
    assert not missing, missing


def test_kill_after_n_is_sigterm_now_and_sigkill_after_n_as_documented() -> None:
    text = (REPO / "docs" / "policy.md").read_text()
    assert "both send SIGTERM as soon as the violation is seen" in text
    rule = Rule("r", memory_limit_default=MemoryLimit(100), response=Response.KILL,
                grace_seconds=5)
    w = Workload("w", WorkloadKey("n", "p"), rule, frozenset({Pid(7)}),
                 shim_used={GpuUuid("G"): 200}, shim_pids=frozenset({Pid(7)}))
    pol = AgentPolicy(unmanaged=Rule("u"))
    first = decide(Snapshot((w,)), pol, 0.0)
    assert [a.kind for a in first] == [ActionKind.ALERT, ActionKind.TERMINATE]
    from agent.decide import remember

    later = Snapshot((w,), history=remember(Snapshot((w,)), pol, first, 0.0))
    assert [a.kind for a in decide(later, pol, 4.9)] == []
    assert [a.kind for a in decide(later, pol, 5.0)] == [ActionKind.KILL]
