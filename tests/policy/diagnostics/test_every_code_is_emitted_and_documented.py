"""Each stable code is produced by at least one input here, and docs/policy.md lists them all."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from policy import LoadResult, load_policy
from policy.diagnostics import CODES, Severity

V = "version 1\n"
R = 'rule "r" {{\n{}\n}}\n'

# code -> an input (one in-memory file) that must produce it
SAMPLES: dict[str, str] = {
    "GW001": V + R.format('  match name == "a" $'),
    "GW002": V + R.format("  defualt gpumem = 4GiB"),
    "GW003": V + 'rule "r" {\n  mode = audit\n',
    "GW004": R.format("  mode = audit"),
    "GW005": V + R.format("  modes = audit"),
    "GW006": V + R.format("  mode = strict"),
    "GW007": V + R.format("  cap gpumem <= 8GB"),
    "GW008": V + R.format("  cap gpucores <= 150%"),
    "GW009": V + R.format('  match name =~ "[a-"\n  mode = audit'),
    "GW010": V + R.format('  match pod == "a"\n  mode = audit'),
    "GW011": V + R.format('  match label == "a"\n  mode = audit'),
    "GW012": V + R.format("  mode = audit") + R.format("  mode = enforce"),
    "GW013": V + "defaults {\n  mode = audit\n}\ndefaults {\n  mode = audit\n}\n",
    "GW014": V + R.format("  mode = audit\n  mode = enforce"),
    "GW017": V + R.format("  on_violation = kill"),
    "GW018": V + "defaults {\n  cap gpumem <= 4GiB\n}\n",
    "GW020": V + 'rule "r {\n}\n',
    "GW021": V + R.format("  match " + "not " * 300 + 'name == "a"'),
    "GW101": V + R.format('  match name == "a" and name == "b"\n  mode = audit'),
    "GW102": V + R.format('  match name == "a"\n  mode = audit')
    + 'rule "s" {\n  mode = audit\n}\n',
    "GW104": V + R.format("  default gpumem = 16GiB\n  cap gpumem <= 8GiB"),
    "GW105": V + R.format('  match name == "a"'),
}
# Codes that need files on disk (includes, unreadable paths, no input).
ON_DISK = {"GW015", "GW016", "GW019", "GW022", "GW103"}


@pytest.mark.parametrize("code", sorted(SAMPLES))
def test_sample_produces_code(code: str, load: Callable[..., LoadResult]) -> None:
    result = load(SAMPLES[code])
    found = [d for d in result.diagnostics if d.code == code]
    assert found, [d.render() for d in result.diagnostics]
    d = found[0]
    assert d.render().startswith(f"t.gwp:{d.span.line}:{d.span.col}: {d.severity.value}[{code}]")
    assert (d.severity is Severity.WARNING) == code.startswith("GW1")
    assert (result.policy is None) == any(x.is_error for x in result.diagnostics)


def test_on_disk_codes(tree: Callable[[dict[str, str]], Path], tmp_path: Path) -> None:
    root = tree({
        "missing.gwp": V + 'include "nope.gwp"\n',
        "cycle_a.gwp": V + 'include "cycle_b.gwp"\n' + R.format("  mode = audit"),
        "cycle_b.gwp": V + 'include "cycle_a.gwp"\n',
        "empty_inc.gwp": V + 'include "lib/*.gwp"\n',
        "lib/.keep": "",
    })
    seen: set[str] = set()
    for name in ("missing.gwp", "cycle_a.gwp", "empty_inc.gwp"):
        seen |= {d.code for d in load_policy([root / name]).diagnostics}
    seen |= {d.code for d in load_policy([root / "nothing-here.gwp"]).diagnostics}
    seen |= {d.code for d in load_policy([]).diagnostics}
    assert seen >= ON_DISK


def test_codes_cover_the_table() -> None:
    assert set(SAMPLES) | ON_DISK == set(CODES)


def test_docs_list_every_code() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "policy.md").read_text()
    documented = set(re.findall(r"^\| `(GW\d{3})` \|", doc, re.M))
    assert documented == set(CODES)


def test_json_form_has_position_code_and_hint(load: Callable[..., LoadResult]) -> None:
    d = load(SAMPLES["GW005"]).errors[0]
    data = json.loads(json.dumps(d.to_json()))
    assert data["code"] == "GW005" and data["severity"] == "error"
    assert (data["file"], data["line"], data["column"]) == ("t.gwp", 3, 3)
    assert data["end_column"] == 8
    assert "did you mean `mode`?" in data["hint"]


def test_all_errors_of_a_file_are_reported_at_once(load: Callable[..., LoadResult]) -> None:
    text = V + "defaults {\n  gpumem = 5000MB\n  gpucore = 10%\n  priority = hihg\n}\n"
    assert [d.code for d in load(text).errors] == ["GW007", "GW005", "GW006"]
