"""Adding a policy setting touches three source files: its declaration in
policy/vocabulary.py (FIELDS), its attribute on policy.model.EffectiveRule and its attribute on
agent.model.Rule.  The test makes exactly those three edits in a copy of the packages and shows
the new setting reach the compiler (every block, precedence, bad values), explain (its rows and
its JSON: EffectiveRule.to_json is derived from the declarations), fmt, the test-file
expectations and the agent's Rule."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("policy", "agent", "gpuwarden")

NEW_FIELD = """\
    Field("burst", parse_duration_value, _EVERYWHERE, builtin=Parsed(1.0, "1s"),
          attr="burst_seconds", explain=lambda e: f"{e.burst_seconds:g}s",
          expect=_expect_seconds, agent="burst_seconds", to_agent=float),
"""

CHECKS = r'''
import json

from agent.rules import to_rule
from policy import Workload, load_texts
from policy.explain import explain_workload
from policy.fmt import format_source
from policy.testing import run_suite

TEXT = """version 1
defaults {
  burst = 2s
}
unmanaged {
  burst   =  3s
}
rule "a" {
  match namespace == "a"
  burst = 5s
}
rule "b" {
  match namespace == "a"
  weight = 10
  priority = high
}
"""
result = load_texts([("p.gwp", TEXT)])
assert result.policy is not None, [d.render() for d in result.errors]
policy = result.policy
a = policy.evaluate(Workload(namespace="a"))
assert (a.burst_seconds, a.decided_by["burst"]) == (5.0, "a"), a
other = policy.evaluate(Workload(namespace="z"))
assert (other.burst_seconds, other.decided_by["burst"]) == (2.0, "defaults"), other
assert policy.unmanaged.burst_seconds == 3.0
assert policy.unmanaged.decided_by["burst"] == "unmanaged"

explained = explain_workload(policy, Workload(namespace="a"))
row = [f for f in explained["fields"] if f["field"] == "burst"]
assert row and row[0]["value"] == "5s" and row[0]["decided_by"] == "a", row
# explain's JSON (EffectiveRule.to_json) carries the new field with no edit of its own.
assert explained["effective"]["burst_seconds"] == 5.0, explained["effective"]
assert json.loads(json.dumps(explained))["effective"]["decided_by"]["burst"] == "a"

formatted, diags = format_source(TEXT, "p.gwp")
assert not diags and "  burst = 3s\n" in formatted, formatted

suite = {"tests": [{"name": "ok", "workload": {"namespace": "a"}, "expect": {"burst": "5s"}},
                   {"name": "off", "workload": {"namespace": "a"}, "expect": {"burst": "4s"}}],
         "unmanaged": {"expect": {"burst": 3}}}
ok, off, unmanaged = run_suite(suite, policy, "t.yaml")
assert ok.passed and unmanaged.passed, (ok, unmanaged)
assert off.failures and off.failures[0].startswith("burst: expected 4s, got 5s"), off

assert to_rule(a, {}).burst_seconds == 5.0

bad = load_texts([("bad.gwp", 'version 1\nrule "x" {\n  burst = 5GiB\n  cap burst <= 1s\n}\n')])
assert bad.policy is None
found = {(d.code, d.span.line) for d in bad.errors}
assert ("GW006", 3) in found or ("GW007", 3) in found, found
assert ("GW005", 4) in found, found
print("ok")
'''


def _insert_after(path: Path, find: object, text: str) -> None:
    """Insert `text` after the last line of the syntax node that `find(module)` returns."""
    source = path.read_text()
    node = find(ast.parse(source))
    lines = source.splitlines(keepends=True)
    lines.insert(node.end_lineno, text)
    path.write_text("".join(lines))


def _last_field(cls: str) -> object:
    def find(module: ast.Module) -> ast.stmt:
        body = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls).body
        return [n for n in body if isinstance(n, ast.AnnAssign)][-1]
    return find


def _last_declaration(module: ast.Module) -> ast.expr:
    assign = next(n for n in module.body if isinstance(n, ast.AnnAssign | ast.Assign)
                  and "FIELDS" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign)
                                              else n.target))
    assert isinstance(assign.value, ast.Tuple)
    return assign.value.elts[-1]


def test_a_new_setting_needs_three_files_and_reaches_compiler_explain_fmt_tests_and_agent(
        tmp_path: Path) -> None:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    _insert_after(tmp_path / "policy/vocabulary.py", _last_declaration, NEW_FIELD)
    _insert_after(tmp_path / "policy/model.py", _last_field("EffectiveRule"),
                  "    burst_seconds: float = 0.0\n")
    _insert_after(tmp_path / "agent/model.py", _last_field("Rule"),
                  "    burst_seconds: float = 0.0\n")

    changed = sorted(str(p.relative_to(tmp_path)) for p, data in before.items()
                     if p.read_bytes() != data)
    assert changed == ["agent/model.py", "policy/model.py", "policy/vocabulary.py"]
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECKS)], cwd=tmp_path,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
