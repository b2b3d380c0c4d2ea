"""Includes: relative paths, globs, directories, missing targets with hints, cycles shown as a
chain, a file included twice loaded once, includes that add nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from policy import load_policy

V = "version 1\n"
RULE = 'rule "{0}" {{\n  match name == "{0}"\n  mode = audit\n}}\n'


def test_glob_include_loads_in_name_order(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({
        "main.gwp": V + 'include "teams/*.gwp"\n',
        "teams/b.gwp": V + RULE.format("b"),
        "teams/a.gwp": V + RULE.format("a"),
    })
    result = load_policy([root / "main.gwp"])
    assert result.ok and result.diagnostics == []
    assert [r.name for r in result.policy.rules] == ["a", "b"]


def test_directory_include(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"main.gwp": V + 'include "lib"\n', "lib/x.gwp": V + RULE.format("x")})
    result = load_policy([root / "main.gwp"])
    assert result.ok and [r.name for r in result.policy.rules] == ["x"]


def test_cycle_is_gw016_showing_the_chain(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({
        "a.gwp": V + 'include "b.gwp"\n' + RULE.format("a"),
        "b.gwp": V + 'include "sub/c.gwp"\n',
        "sub/c.gwp": V + 'include "../a.gwp"\n',
    })
    result = load_policy([root / "a.gwp"])
    assert result.policy is None
    [d] = result.errors
    assert d.code == "GW016"
    names = [Path(p).name for p in d.message.removeprefix("include cycle: ").split(" -> ")]
    assert names == ["a.gwp", "b.gwp", "c.gwp", "a.gwp"]
    assert Path(d.span.file).name == "c.gwp" and d.span.line == 2
    assert "^" in d.render()


def test_self_include_is_a_cycle(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"a.gwp": V + 'include "a.gwp"\n' + RULE.format("a")})
    assert [d.code for d in load_policy([root / "a.gwp"]).errors] == ["GW016"]


def test_missing_include_suggests_a_near_name(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"main.gwp": V + 'include "traning.gwp"\n', "training.gwp": V + RULE.format("t")})
    result = load_policy([root / "main.gwp"])
    [d] = result.errors
    assert d.code == "GW015" and (d.span.line, d.span.col) == (2, 9)
    assert d.hint == "did you mean `training.gwp`?"


def test_absolute_include_is_refused(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"main.gwp": V + 'include "/etc/x.gwp"\n'})
    assert [d.code for d in load_policy([root / "main.gwp"]).errors] == ["GW015"]


def test_diamond_loads_once(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({
        "main.gwp": V + 'include "a.gwp"\ninclude "b.gwp"\n',
        "a.gwp": V + 'include "common.gwp"\n' + RULE.format("a"),
        "b.gwp": V + 'include "common.gwp"\n' + RULE.format("b"),
        "common.gwp": V + RULE.format("common"),
    })
    result = load_policy([root / "main.gwp"])
    assert result.ok, [d.render() for d in result.diagnostics]
    assert [r.name for r in result.policy.rules] == ["common", "a", "b"]


def test_include_that_adds_nothing_warns(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({
        "main.gwp": V + 'include "empty.gwp"\ninclude "none/*.gwp"\n' + RULE.format("m"),
        "empty.gwp": V + "# nothing yet\n",
        "none/readme.txt": "",
    })
    result = load_policy([root / "main.gwp"])
    assert result.ok
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("GW103", 2), ("GW103", 3)]


def test_errors_in_included_files_name_that_file(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"main.gwp": V + 'include "bad.gwp"\n',
                 "bad.gwp": V + 'rule "x" {\n  mode = loud\n}\n'})
    [d] = load_policy([root / "main.gwp"]).errors
    assert Path(d.span.file).name == "bad.gwp" and (d.span.line, d.code) == (3, "GW006")


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    assert [d.code for d in load_policy([tmp_path / "nope.gwp"]).errors] == ["GW019"]
    assert [d.code for d in load_policy([tmp_path]).errors] == ["GW019"]


def test_unreadable_file_is_gw019(tree: Callable[[dict[str, str]], Path]) -> None:
    root = tree({"main.gwp": V + 'include "bin.gwp"\n'})
    (root / "bin.gwp").write_bytes(b"\xff\xfe\x00bad")
    assert [d.code for d in load_policy([root / "main.gwp"]).errors] == ["GW019"]


def test_reader_injection(tmp_path: Path) -> None:
    (tmp_path / "x.gwp").write_text("ignored")
    result = load_policy([tmp_path / "x.gwp"], reader=lambda p: V + RULE.format("injected"))
    assert [r.name for r in result.policy.rules] == ["injected"]
