"""The closed vocabularies: which settings exist, where they may appear, what values they take.

Each value parser takes the words of a setting and returns (value, canonical text) or raises
`BadValue`, which the compiler turns into a diagnostic at the offending word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policy import ast
from policy.diagnostics import Span, closest
from policy.model import ViolationResponse
from policy.units import (
    Memory,
    UnitError,
    format_mib,
    parse_duration,
    parse_percent,
    parse_size_mib,
)

__all__ = [
    "BLOCK_SETTINGS",
    "CAP_KEYS",
    "DEFAULT_KEYS",
    "PARSERS",
    "BadValue",
    "Parsed",
    "parse_setting",
]


class BadValue(Exception):
    def __init__(self, code: str, span: Span, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code, self.span, self.message, self.hint = code, span, message, hint


@dataclass(frozen=True, slots=True)
class Parsed:
    value: object
    text: str  # canonical, unit-normalised text (digest, explain)


Parser = Callable[[Sequence[ast.Value], Span, str], Parsed]


def _one(values: Sequence[ast.Value], where: Span, key: str) -> ast.Value:
    if not values:
        raise BadValue("GW006", where, f"`{key}` needs a value")
    if len(values) > 1:
        extra = values[1]
        raise BadValue("GW006", extra.span, f"unexpected `{extra.text}` after the value of `{key}`",
                       f"`{key}` takes one value")
    return values[0]


def _unit(fn: Callable[[str], object], v: ast.Value) -> object:
    try:
        return fn(v.text)
    except UnitError as err:
        raise BadValue(err.code, v.span, str(err), err.hint) from None


def _word(v: ast.Value, key: str, choices: Sequence[str]) -> str:
    word = v.string if v.kind in ("word", "number") else None
    if word in choices:
        return word
    guess = closest(v.string, choices) if v.kind == "word" else None
    hint = (f"did you mean `{guess}`? " if guess else "") + "valid: " + " | ".join(choices)
    raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`", hint)


def parse_count(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind != "number" or "." in v.text:
        raise BadValue("GW006", v.span, f"`{key}` must be a whole number of GPUs, not `{v.text}`",
                       f"e.g. `{key} = 1`")
    n = int(v.text)
    if not 1 <= n <= 64:
        raise BadValue("GW008", v.span, f"`{key}` = {n} is out of range", "GPU counts are 1..64")
    return Parsed(n, str(n))


def _memory(v: ast.Value, key: str, allow_zero: bool) -> Parsed:
    if v.kind == "word" and v.text == "whole":
        return Parsed(Memory("whole"), "whole")
    if v.kind == "quantity" and v.text.endswith("%"):
        pct = int(_unit(parse_percent, v))  # type: ignore[call-overload]
        if not 1 <= pct <= 100:
            raise BadValue("GW008", v.span, f"`{key}` percentage {pct}% is out of range",
                           "percentages of GPU memory are 1%..100%")
        return Parsed(Memory("percent", pct), f"{pct}%")
    if v.kind in ("quantity", "number"):
        mib = int(_unit(parse_size_mib, v))  # type: ignore[call-overload]
        if mib == 0 and not allow_zero:
            raise BadValue("GW008", v.span, f"`{key}` of 0 leaves no memory at all",
                           "write `whole` for the whole GPU; 0MiB is only meaningful in "
                           "`unmanaged`")
        return Parsed(Memory("mib", mib), format_mib(mib))
    raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`",
                   "write a size (5000MiB, 40GiB), a percentage of the GPU (50%) or `whole`")


def parse_memory(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    return _memory(_one(values, where, key), key, allow_zero=False)


def parse_memory_or_zero(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    return _memory(_one(values, where, key), key, allow_zero=True)


def parse_cores(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind not in ("quantity", "number"):
        raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`",
                       "write a percentage of one GPU's compute, e.g. 30% (0% = no limit)")
    pct = int(_unit(parse_percent, v))  # type: ignore[call-overload]
    if not 0 <= pct <= 100:
        raise BadValue("GW008", v.span, f"`{key}` {pct}% is out of range", "0%..100%")
    return Parsed(pct, f"{pct}%")


def parse_priority(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    word = _word(v, key, ("high", "low", "0", "1"))
    prio = 0 if word in ("high", "0") else 1
    return Parsed(prio, "high" if prio == 0 else "low")


def _enum(*choices: str) -> Parser:
    def parse(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
        word = _word(_one(values, where, key), key, choices)
        return Parsed(word, word)

    return parse


def parse_duration_value(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind not in ("quantity", "number"):
        raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`", "write a duration like 30s")
    seconds = float(_unit(parse_duration, v))  # type: ignore[arg-type]
    if seconds > 7 * 86400:
        raise BadValue("GW008", v.span, f"`{key}` {v.text} is longer than a week")
    return Parsed(seconds, f"{seconds:g}s")


def parse_size_value(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind not in ("quantity", "number"):
        raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`", "write a size like 512MiB")
    mib = int(_unit(parse_size_mib, v))  # type: ignore[call-overload]
    return Parsed(mib, format_mib(mib))


def parse_weight(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind != "number" or "." in v.text:
        raise BadValue("GW006", v.span, f"`weight` must be a whole number, not `{v.text}`",
                       "higher weight wins; rules without a weight have 0")
    n = int(v.text)
    if n > 1_000_000:
        raise BadValue("GW008", v.span, f"weight {n} is out of range", "0..1000000")
    return Parsed(n, str(n))


_ACTIONS = ("alert", "terminate", "kill")
_SEVERITIES = ("info", "warning", "critical")
_VIOLATION_FORMS = ('alert ["Name"] [severity info|warning|critical]',
                    'terminate|kill after DURATION [alert "Name"] [severity ...]')


def parse_violation(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    """`alert "Name" severity warning` | `terminate after 30s` | `kill after 0s alert "X"`."""
    forms = "; ".join(_VIOLATION_FORMS)
    if not values:
        raise BadValue("GW017", where, "`on_violation` needs a response", forms)
    words = list(values)
    head = words.pop(0)
    action = _action(head, forms)
    grace = 0.0
    alert_name: str | None = None
    severity: str | None = None
    if action != "alert":
        if not words or words[0].text != "after":
            at = words[0].span if words else head.span
            raise BadValue("GW017", at, f"`{action}` needs `after DURATION`",
                           f"e.g. `{action} after 10s` (`after 0s` acts at once)")
        after = words.pop(0)
        if not words:
            raise BadValue("GW017", after.span, "`after` needs a duration", "e.g. `after 10s`")
        grace = float(parse_duration_value([words.pop(0)], where, "grace").value)  # type: ignore[arg-type]
    elif words and words[0].kind == "string":
        alert_name = words.pop(0).string
    while words:
        w = words.pop(0)
        if w.text == "alert" and action != "alert" and alert_name is None:
            if not words or words[0].kind != "string":
                raise BadValue("GW017", w.span, "`alert` needs a name in quotes",
                               'e.g. `alert "GpuMemoryOverLimit"`')
            alert_name = words.pop(0).string
        elif w.text == "severity" and severity is None:
            if not words:
                raise BadValue("GW017", w.span, "`severity` needs a level",
                               "info | warning | critical")
            severity = _word(words.pop(0), "severity", _SEVERITIES)
        else:
            raise BadValue("GW017", w.span, f"unexpected `{w.text}` in on_violation", forms)
    if alert_name is not None and not alert_name.strip():
        raise BadValue("GW017", where, "alert name is empty")
    sev = severity or ("warning" if action == "alert" else "critical")
    response = ViolationResponse(action, grace, alert_name, sev)  # type: ignore[arg-type]
    return Parsed(response, response.describe())


def _action(v: ast.Value, forms: str) -> str:
    if v.kind == "word" and v.text in _ACTIONS:
        return v.text
    guess = closest(v.string, _ACTIONS) if v.kind == "word" else None
    hint = f"did you mean `{guess}`? " if guess else ""
    raise BadValue("GW017", v.span, f"unknown on_violation action `{v.text}`",
                   hint + "valid: " + forms)


PARSERS: dict[str, Parser] = {
    "gpu": parse_count,
    "gpumem": parse_memory,
    "gpucores": parse_cores,
    "priority": parse_priority,
    "core_policy": _enum("default", "force", "disable"),
    "mode": _enum("audit", "enforce"),
    "on_violation": parse_violation,
    "compute_grace": parse_duration_value,
    "bypass_tolerance": parse_size_value,
    "weight": parse_weight,
}

# Which `key = value` settings each block accepts.
BLOCK_SETTINGS: dict[str, tuple[str, ...]] = {
    "defaults": ("gpu", "gpumem", "gpucores", "priority", "core_policy", "mode", "on_violation",
                 "compute_grace", "bypass_tolerance"),
    "unmanaged": ("gpumem", "gpucores", "mode", "on_violation", "compute_grace",
                  "bypass_tolerance"),
    "rule": ("priority", "core_policy", "mode", "on_violation", "compute_grace",
             "bypass_tolerance", "weight"),
}
DEFAULT_KEYS = ("gpu", "gpumem", "gpucores", "priority")
CAP_KEYS = ("gpu", "gpumem", "gpucores")
ALL_WORDS = tuple(PARSERS)


_PARSED: dict[tuple[str, str, tuple[tuple[str, str], ...]], Parsed] = {}


def parse_setting(block: str, key: str, values: Sequence[ast.Value], where: Span) -> Parsed:
    """Parse a setting's words.  Valid results are memoised by their text (large policies
    repeat the same few values thousands of times); errors are not, as they carry places."""
    if len(values) == 1:
        memo = (block, key, ((values[0].kind, values[0].text),))
    else:
        memo = (block, key, tuple([(v.kind, v.text) for v in values]))
    found = _PARSED.get(memo)
    if found is not None:
        return found
    parser = parse_memory_or_zero if (block, key) == ("unmanaged", "gpumem") else PARSERS[key]
    parsed = parser(values, where, key)
    if len(_PARSED) < 4096:
        _PARSED[memo] = parsed
    return parsed
