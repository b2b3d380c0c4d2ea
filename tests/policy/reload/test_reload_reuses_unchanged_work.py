"""Reloading: an unchanged policy set comes back as the same compiled policy without parsing
again; a changed file is parsed again and the policy recompiled; a broken edit gives errors
(the agent then keeps its last good policy)."""

from __future__ import annotations

from pathlib import Path

from policy import Workload, load_policy
from policy.loader import PARSE_CACHE

V = "version 1\n"


def test_unchanged_reload_reuses_parse_and_compile(tmp_path: Path) -> None:
    (tmp_path / "a.gwp").write_text(V + 'rule "a" {\n  mode = audit\n}\n')
    (tmp_path / "b.gwp").write_text(V + 'rule "b" {\n  match name == "x"\n  priority = high\n}\n')
    PARSE_CACHE.clear()
    first = load_policy([tmp_path])
    assert (PARSE_CACHE.hits, PARSE_CACHE.misses) == (0, 2)
    second = load_policy([tmp_path])
    assert (PARSE_CACHE.hits, PARSE_CACHE.misses) == (2, 2)
    assert second.policy is first.policy

    (tmp_path / "b.gwp").write_text(V + 'rule "b" {\n  match name == "x"\n  priority = low\n}\n')
    third = load_policy([tmp_path])
    assert (PARSE_CACHE.hits, PARSE_CACHE.misses) == (3, 3)
    assert third.policy is not None and third.policy is not first.policy
    assert third.policy.digest != first.policy.digest
    assert third.policy.evaluate(Workload(name="x")).priority == 1


def test_broken_edit_reports_errors_and_no_policy(tmp_path: Path) -> None:
    path = tmp_path / "a.gwp"
    path.write_text(V + 'rule "a" {\n  mode = audit\n}\n')
    assert load_policy([path]).ok
    path.write_text(V + 'rule "a" {\n  mode = audit\n')
    broken = load_policy([path])
    assert broken.policy is None and [d.code for d in broken.errors] == ["GW003"]
    path.write_text(V + 'rule "a" {\n  mode = audit\n}\n')
    assert load_policy([path]).ok


def test_same_text_under_another_name_is_parsed_for_that_name(tmp_path: Path) -> None:
    text = V + 'rule "a" {\n  mode = loud\n}\n'
    (tmp_path / "x.gwp").write_text(text)
    (tmp_path / "y.gwp").write_text(text)
    assert Path(load_policy([tmp_path / "x.gwp"]).errors[0].span.file).name == "x.gwp"
    assert Path(load_policy([tmp_path / "y.gwp"]).errors[0].span.file).name == "y.gwp"
