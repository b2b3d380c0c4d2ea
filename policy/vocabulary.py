"""The closed vocabularies: which settings exist, where they may appear, what values they take.

`FIELDS` declares each setting once; everything else that names settings derives from it.

Each value parser takes the words of a setting and returns (value, canonical text) or raises
`BadValue`, which the compiler turns into a diagnostic at the offending word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from policy import ast
from policy.diagnostics import Span, closest
from policy.model import MIB, EffectiveRule, ViolationResponse
from policy.units import (
    Memory,
    UnitError,
    format_mib,
    parse_duration,
    parse_percent,
    parse_size_mib,
)

T = TypeVar("T")

__all__ = [
    "BLOCK_SETTINGS",
    "CAP_KEYS",
    "DEFAULT_KEYS",
    "EFFECTIVE",
    "FIELD",
    "FIELDS",
    "PLAIN",
    "TO_AGENT",
    "BadValue",
    "Field",
    "Parsed",
    "expect_mib",
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


def _unit(fn: Callable[[str], T], v: ast.Value) -> T:
    try:
        return fn(v.text)
    except UnitError as err:
        raise BadValue(err.code, v.span, str(err), err.hint) from None


def _word(v: ast.Value, key: str, choices: Sequence[str]) -> str:
    word = v.string if v.kind in ("word", "number") else None
    if word is not None and word in choices:
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
        pct = _unit(parse_percent, v)
        if not 1 <= pct <= 100:
            raise BadValue("GW008", v.span, f"`{key}` percentage {pct}% is out of range",
                           "percentages of GPU memory are 1%..100%")
        return Parsed(Memory("percent", pct), f"{pct}%")
    if v.kind in ("quantity", "number"):
        mib = _unit(parse_size_mib, v)
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
    pct = _unit(parse_percent, v)
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
    seconds = float(_unit(parse_duration, v))
    if seconds > 7 * 86400:
        raise BadValue("GW008", v.span, f"`{key}` {v.text} is longer than a week")
    return Parsed(seconds, f"{seconds:g}s")


def parse_size_value(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind not in ("quantity", "number"):
        raise BadValue("GW006", v.span, f"invalid {key} `{v.text}`", "write a size like 512MiB")
    mib = _unit(parse_size_mib, v)
    return Parsed(mib, format_mib(mib))


def _short(text: str, keep: int = 40) -> str:
    """A value as quoted in a message: a hostile 5,000-digit one is cut, saying how long it was."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text)} characters)"


def parse_weight(values: Sequence[ast.Value], where: Span, key: str) -> Parsed:
    v = _one(values, where, key)
    if v.kind != "number" or "." in v.text:
        raise BadValue("GW006", v.span, f"`weight` must be a whole number, not `{v.text}`",
                       "higher weight wins; rules without a weight have 0")
    n = int(v.text) if len(v.text.lstrip("0")) <= 7 else 1_000_001  # no 5,000-digit int()
    if n > 1_000_000:
        raise BadValue("GW008", v.span, f"weight {_short(v.text)} is out of range", "0..1000000")
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
        grace = float(parse_duration_value([words.pop(0)], where, "grace").value)  # type: ignore[arg-type]  # seconds
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
    response = ViolationResponse(action, grace, alert_name, sev)  # type: ignore[arg-type]  # words checked
    return Parsed(response, response.describe())


def _action(v: ast.Value, forms: str) -> str:
    if v.kind == "word" and v.text in _ACTIONS:
        return v.text
    guess = closest(v.string, _ACTIONS) if v.kind == "word" else None
    hint = f"did you mean `{guess}`? " if guess else ""
    raise BadValue("GW017", v.span, f"unknown on_violation action `{v.text}`",
                   hint + "valid: " + forms)


def _same(value: object) -> object:
    return value


@dataclass(frozen=True, slots=True)
class Field:
    """One policy setting, declared once.  The compiler's vocabularies, the built-in defaults,
    the effective rule's plain settings, explain, the test-file expectations and the agent's
    Rule are all derived from `FIELDS`: a new setting is one entry here, its attribute on
    `EffectiveRule` (policy.model) and, if the agent acts on it, on `Rule` (agent.model)."""

    key: str  # the word written in a policy file
    parse: Parser
    blocks: tuple[str, ...] = ()  # the blocks that take `key = value`: defaults, unmanaged, rule
    default: bool = False  # a rule may say `default key = value` (used when the pod does not ask)
    cap: bool = False  # a rule may say `cap key <= value`
    builtin: Parsed | None = None  # the value when no block sets it
    unmanaged_builtin: Parsed | None = None  # the same for processes no workload owns
    unmanaged_parse: Parser | None = None  # the parser in `unmanaged`, when it differs
    # A plain setting is decided whole by the matching rule of highest precedence and lands on
    # `EffectiveRule.<attr>` as parsed; "" for the fields the compiler derives from the request.
    attr: str = ""
    explain: Callable[[EffectiveRule], str] | None = None  # the effective value, as explain shows
    expect: Callable[[object], object] | None = None  # a test file's expected value -> attr's
    agent: str = ""  # the agent Rule attribute a plain setting becomes ("" = none)
    to_agent: Callable[[Any], Any] = _same  # and how its value converts

    @property
    def slots(self) -> tuple[str, ...]:
        """Where a rule can decide it: `key` itself, `default.key`, `cap.key`."""
        return ((self.key,) if "rule" in self.blocks else ()) + \
            ((f"default.{self.key}",) if self.default else ()) + \
            ((f"cap.{self.key}",) if self.cap else ())


def _expect_seconds(want: object) -> float:
    return parse_duration(want) if isinstance(want, str) else float(want)  # type: ignore[arg-type]  # YAML


def expect_mib(want: object) -> int:
    """A size in a test file: MiB as a whole number (3000) or with a unit ("3GiB")."""
    if isinstance(want, int) and not isinstance(want, bool):
        return want
    if isinstance(want, str):
        return parse_size_mib(want)
    raise ValueError("write MiB (3000) or a size (\"3GiB\")")


def _explain_gpumem(e: EffectiveRule) -> str:
    if e.gpumem_mib is not None:
        return format_mib(e.gpumem_mib)
    return f"{e.gpumem_percentage}%" if e.gpumem_percentage is not None else "whole GPU"


_EVERYWHERE = ("defaults", "unmanaged", "rule")
FIELDS: tuple[Field, ...] = (
    Field("gpu", parse_count, ("defaults",), default=True, cap=True, builtin=Parsed(1, "1"),
          explain=lambda e: str(e.gpu)),
    Field("gpumem", parse_memory, ("defaults", "unmanaged"), default=True, cap=True,
          builtin=Parsed(Memory("mib", 5000), "5000MiB"),
          unmanaged_builtin=Parsed(Memory("mib", 0), "0MiB"),
          unmanaged_parse=parse_memory_or_zero, explain=_explain_gpumem),
    Field("gpucores", parse_cores, ("defaults", "unmanaged"), default=True, cap=True,
          builtin=Parsed(0, "0%"), unmanaged_builtin=Parsed(0, "0%"),
          explain=lambda e: f"{e.gpucores}%" + (" (no limit)" if e.gpucores == 0 else "")),
    Field("priority", parse_priority, ("defaults", "rule"), default=True,
          builtin=Parsed(1, "low"),
          explain=lambda e: "high (0)" if e.priority == 0 else "low (1)"),
    Field("core_policy", _enum("default", "force", "disable"), ("defaults", "rule"),
          builtin=Parsed("default", "default"), attr="core_policy",
          explain=lambda e: e.core_policy, expect=_same, agent="core_policy", to_agent=str),
    Field("mode", _enum("audit", "enforce"), _EVERYWHERE, builtin=Parsed("enforce", "enforce"),
          unmanaged_builtin=Parsed("audit", "audit"), attr="mode",
          explain=lambda e: e.mode, expect=_same),
    Field("on_violation", parse_violation, _EVERYWHERE,
          builtin=Parsed(ViolationResponse("kill", 10.0, None, "critical"),
                         "kill after 10s severity critical"),
          # Processes no workload owns: an alert only (node daemons such as DCGM must not be
          # killed by surprise).
          unmanaged_builtin=Parsed(ViolationResponse("alert", 0.0, "GpuwardenUnmanagedProcess",
                                                     "warning"),
                                   'alert "GpuwardenUnmanagedProcess" severity warning'),
          attr="on_violation", explain=lambda e: e.on_violation.describe()),
    Field("compute_grace", parse_duration_value, _EVERYWHERE, builtin=Parsed(30.0, "30s"),
          attr="compute_grace_seconds", explain=lambda e: f"{e.compute_grace_seconds:g}s",
          expect=_expect_seconds, agent="compute_grace_seconds", to_agent=float),
    # NVML counts the CUDA context (~520 MiB for PyTorch on an H200) that the shim never sees.
    Field("bypass_tolerance", parse_size_value, _EVERYWHERE, builtin=Parsed(768, "768MiB"),
          attr="bypass_tolerance_mib", explain=lambda e: format_mib(e.bypass_tolerance_mib),
          expect=expect_mib, agent="bypass_tolerance_bytes", to_agent=lambda mib: mib * MIB),
    Field("weight", parse_weight, ("rule",)),  # the rule's precedence, not an effective field
)
FIELD: Mapping[str, Field] = MappingProxyType({f.key: f for f in FIELDS})
# The fields of an effective rule (explain's rows, a test file's expectations), in order.
EFFECTIVE: tuple[Field, ...] = tuple(f for f in FIELDS if f.explain is not None)
PLAIN: tuple[Field, ...] = tuple(f for f in FIELDS if f.attr)
TO_AGENT: tuple[Field, ...] = tuple(f for f in FIELDS if f.agent)

# Which `key = value` settings each block accepts.
BLOCK_SETTINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    block: tuple(f.key for f in FIELDS if block in f.blocks) for block in _EVERYWHERE})
DEFAULT_KEYS = tuple(f.key for f in FIELDS if f.default)
CAP_KEYS = tuple(f.key for f in FIELDS if f.cap)


_PARSED: dict[tuple[str, str, tuple[tuple[str, str], ...]], Parsed] = {}


def parse_setting(block: str, key: str, values: Sequence[ast.Value], where: Span) -> Parsed:
    """Parse a setting's words.  Valid results are memoised by their text (large policies
    repeat the same few values thousands of times); errors are not, as they carry places."""
    memo: tuple[str, str, tuple[tuple[str, str], ...]]
    if len(values) == 1:
        memo = (block, key, ((values[0].kind, values[0].text),))
    else:
        memo = (block, key, tuple([(v.kind, v.text) for v in values]))
    found = _PARSED.get(memo)
    if found is not None:
        return found
    f = FIELD[key]
    parser = f.unmanaged_parse if block == "unmanaged" and f.unmanaged_parse else f.parse
    parsed = parser(values, where, key)
    if len(_PARSED) < 4096:
        _PARSED[memo] = parsed
    return parsed
