"""A typo'd keyword, a bad unit, an unclosed block and friends fail with file:line:col, the
line, a caret under the offending text, and a stable code."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from policy import LoadResult


def only_error(result: LoadResult) -> str:
    assert result.policy is None
    assert len(result.errors) == 1, [d.render() for d in result.errors]
    return result.errors[0].render()


def test_typo_keyword_is_gw002_with_hint(load: Callable[..., LoadResult]) -> None:
    text = 'version 1\nrule "x" {\n  mtach namespace == "a"\n  mode = audit\n}\n'
    assert only_error(load(text)) == (
        "t.gwp:3:3: error[GW002]: unknown keyword `mtach`\n"
        '   mtach namespace == "a"\n'
        "   ^^^^^\n"
        "  = hint: did you mean `match`?"
    )


def test_bad_unit_is_gw007_with_caret_under_the_quantity(load: Callable[..., LoadResult]) -> None:
    text = 'version 1\nrule "x" {\n  cap gpumem <= 8GB\n}\n'
    rendered = only_error(load(text))
    assert rendered.splitlines()[0] == "t.gwp:3:17: error[GW007]: unknown size unit `GB`"
    assert rendered.splitlines()[2] == "                 ^^^"
    assert "did you mean `8GiB`?" in rendered


def test_unclosed_block_at_eof_is_gw003_at_the_opener(load: Callable[..., LoadResult]) -> None:
    text = 'version 1\n\nrule "x" {\n  mode = audit\n'
    rendered = only_error(load(text))
    assert rendered.startswith("t.gwp:3:1: error[GW003]: `rule \"x\"` block is never closed "
                               "before the end of the file")
    assert "\n ^" in rendered


def test_unclosed_block_before_next_rule_is_gw003(load: Callable[..., LoadResult]) -> None:
    text = 'version 1\nrule "a" {\n  mode = audit\nrule "b" {\n  mode = audit\n}\n'
    rendered = only_error(load(text))
    assert rendered.startswith("t.gwp:2:1: error[GW003]:")
    assert "before `rule` on line 4" in rendered


def test_unterminated_string_is_gw020(load: Callable[..., LoadResult]) -> None:
    rendered = only_error(load('version 1\nrule "x {\n}\n'))
    assert rendered.startswith("t.gwp:2:6: error[GW020]: unterminated string")


def test_unexpected_character_is_gw001(load: Callable[..., LoadResult]) -> None:
    rendered = only_error(load('version 1\nrule "x" {\n  match name == "a" @\n}\n'))
    assert rendered.startswith("t.gwp:3:21: error[GW001]: unexpected character `@`")
    assert "expected" in rendered


def test_single_equals_in_match_is_gw001(load: Callable[..., LoadResult]) -> None:
    rendered = only_error(load('version 1\nrule "x" {\n  match name = "a"\n}\n'))
    assert rendered.startswith("t.gwp:3:14: error[GW001]: unexpected `=`")


@pytest.mark.parametrize("text, where", [
    ('rule "x" {\n  mode = audit\n}\n', "t.gwp:1:1"),
    ('version 2\nrule "x" {\n  mode = audit\n}\n', "t.gwp:1:9"),
    ('rule "x" {\n  mode = audit\n}\nversion 1\n', "t.gwp:4:1"),
])
def test_version_header_is_required_first_and_supported(
    load: Callable[..., LoadResult], text: str, where: str
) -> None:
    result = load(text)
    assert result.policy is None
    assert any(d.code == "GW004" and d.render().startswith(where) for d in result.errors), [
        d.render() for d in result.errors]


def test_deep_nesting_is_gw021_not_a_crash(load: Callable[..., LoadResult]) -> None:
    text = 'version 1\nrule "x" {\n  match ' + "(" * 500 + 'name == "a"' + ")" * 500 + "\n}\n"
    assert only_error(load(text)).startswith("t.gwp:3:")
    assert load(text).errors[0].code == "GW021"


def test_long_and_chain_compiles(load: Callable[..., LoadResult]) -> None:
    match = " and ".join(f'label k{i} != "v"' for i in range(3000))
    result = load(f'version 1\nrule "x" {{\n  match {match}\n  mode = audit\n}}\n')
    assert result.ok, [d.render() for d in result.diagnostics]


def test_comments_and_blank_lines_are_ignored(load: Callable[..., LoadResult]) -> None:
    text = ("# head\n\nversion 1  # v\n\n# c\nrule \"x\" {  # r\n  # inside\n\n"
            "  mode = audit # m\n}\n")
    assert load(text).ok


@pytest.mark.parametrize("line, where, hint", [
    ('  match namespace = "a"', "3:19", "to compare, write `==`"),
    ("  match namespace == a", "3:22", 'quote it: `"a"`'),
    ('  match namespace in "a"', "3:22", '`in` takes a list: `in ["a"]`'),
    ('  match name == "a" && name == "b"', "3:21", "write `and`"),
    ("  priority: high", "3:11", "settings are written `key = value`"),
    ("  cap gpumem < 8GiB", "3:14", "caps are written `cap gpumem <= 8GiB`"),
    ("  default gpumem 4GiB", "3:18", "write `key = value`"),
    ('  match label t in ["a"\n  mode = audit', "4:3", "the list is not closed: add `]`"),
    ("  mode = audit\n}", "5:1", "this `}` closes no block"),
])
def test_common_mistakes_get_targeted_hints(
    load: Callable[..., LoadResult], line: str, where: str, hint: str
) -> None:
    [d] = load(f'version 1\nrule "x" {{\n{line}\n}}\n').errors
    assert (f"{d.span.line}:{d.span.col}", d.code, d.hint) == (where, "GW001", hint)


def test_unquoted_rule_name(load: Callable[..., LoadResult]) -> None:
    [d] = load("version 1\nrule training {\n}\n").errors
    assert (d.span.line, d.span.col, d.hint) == (2, 6, 'quote it: `"training"`')


def test_one_run_reports_every_broken_statement(load: Callable[..., LoadResult]) -> None:
    text = ('version 1\nrule "a" {\n  match namespace = "x"\n  mode = loud\n'
            "  cap gpumem < 8GiB\n  priority: high\n}\n"
            'rule "b" {\n  mtach name == "y"\n  mode = audit\n}\n')
    found = [(d.span.line, d.code) for d in load(text).errors]
    assert found == [(3, "GW001"), (4, "GW006"), (5, "GW001"), (6, "GW001"), (9, "GW002")]


def test_no_cascade_after_a_broken_header_or_open_bracket(
    load: Callable[..., LoadResult],
) -> None:
    broken_header = 'version 1\nrule x {\n  mode = audit\n  priority = high\n}\n'
    assert [d.span.line for d in load(broken_header).errors] == [2]
    open_list = 'version 1\nrule "a" {\n  match label t in ["a"\n  mode = audit\n}\n'
    assert [d.span.line for d in load(open_list).errors] == [4]
