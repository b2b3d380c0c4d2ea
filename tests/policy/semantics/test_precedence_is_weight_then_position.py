"""Each field is decided by the matching rule of highest precedence that sets it: weight first,
then position (later wins; included files come before the file that includes them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from policy import CompiledPolicy, Workload, load_policy

V = "version 1\n"


def test_later_rule_wins_per_field(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(V + 'rule "a" {\n  mode = audit\n  priority = high\n}\n'
                   'rule "b" {\n  mode = enforce\n}\n')
    e = p.evaluate(Workload())
    assert (e.mode, e.decided_by["mode"]) == ("enforce", "b")
    assert (e.priority, e.decided_by["priority"]) == (0, "a")  # b does not set it
    assert e.matched_rules == ("b", "a")


def test_weight_beats_position(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(V + 'rule "a" {\n  weight = 5\n  mode = audit\n}\n'
                   'rule "b" {\n  mode = enforce\n}\n')
    e = p.evaluate(Workload())
    assert (e.mode, e.decided_by["mode"]) == ("audit", "a")
    assert e.matched_rules == ("a", "b")


def test_non_matching_rule_decides_nothing(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(V + 'rule "a" {\n  mode = audit\n}\n'
                   'rule "b" {\n  match namespace == "x"\n  mode = enforce\n}\n')
    assert p.evaluate(Workload(namespace="y")).decided_by["mode"] == "a"
    assert p.evaluate(Workload(namespace="x")).decided_by["mode"] == "b"


def test_defaults_then_builtin(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(V + "defaults {\n  mode = audit\n}\n")
    e = p.evaluate(Workload())
    assert (e.mode, e.decided_by["mode"]) == ("audit", "defaults")
    # the built-in defaults (docs/policy.md) when nothing is said
    assert (e.gpumem_mib, e.decided_by["gpumem"]) == (5000, "built-in")
    assert (e.gpucores, e.priority, e.gpu) == (0, 1, 1)


def test_included_file_ranks_below_the_includer(tmp_path: Path) -> None:
    (tmp_path / "base.gwp").write_text(V + 'rule "base" {\n  mode = audit\n}\n')
    (tmp_path / "main.gwp").write_text(
        V + 'rule "early" {\n  priority = high\n}\ninclude "base.gwp"\n'
        'rule "main" {\n  mode = enforce\n  priority = low\n}\n')
    result = load_policy([tmp_path / "main.gwp"])
    assert result.policy is not None
    assert [r.name for r in result.policy.rules] == ["base", "early", "main"]


def test_directory_loads_files_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "b.gwp").write_text(V + 'rule "b" {\n  mode = enforce\n}\n')
    (tmp_path / "a.gwp").write_text(V + 'rule "a" {\n  mode = audit\n}\n')
    result = load_policy([tmp_path])
    assert result.policy is not None
    assert result.policy.evaluate(Workload()).decided_by["mode"] == "b"


def test_admission_allow_can_override_deny(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(V + 'rule "no" {\n  match namespace =~ "sandbox-.*"\n  deny "ask first"\n}\n'
                   'rule "ok" {\n  match label approved == "true"\n  allow\n}\n')
    assert p.evaluate(Workload(namespace="sandbox-a")).denied == "ask first"
    e = p.evaluate(Workload(namespace="sandbox-a", labels={"approved": "true"}))
    assert e.denied is None and e.decided_by["denied"] == "ok"
