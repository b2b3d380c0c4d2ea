"""Diagnostics: what the policy toolchain says about a file, with a stable code and a place.

Every problem the parser, loader or compiler finds becomes one `Diagnostic`; nothing raises out
of `load_policy`.  Codes are stable (documented in docs/policy.md) so CI greps and tests can
rely on them; messages may be reworded.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "CODES",
    "Diagnostic",
    "Severity",
    "Span",
    "closest",
    "line_at",
    "render_all",
    "source_lines",
]


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


# Every code the toolchain emits, with a one-line summary (docs/policy.md mirrors this table and a
# test keeps them in step).
CODES: dict[str, str] = {
    "GW001": "syntax error: unexpected token or character",
    "GW002": "unknown keyword at the start of a statement",
    "GW003": "unclosed block",
    "GW004": "missing or unsupported version header",
    "GW005": "unknown setting or field name",
    "GW006": "invalid value",
    "GW007": "unknown or missing unit",
    "GW008": "value out of range",
    "GW009": "invalid regular expression",
    "GW010": "unknown match field",
    "GW011": "match field needs a key, or takes none",
    "GW012": "duplicate rule name",
    "GW013": "more than one defaults or unmanaged block",
    "GW014": "duplicate statement or setting in one block",
    "GW015": "include target not found",
    "GW016": "include cycle",
    "GW017": "invalid on_violation response",
    "GW018": "statement not allowed in this block",
    "GW019": "cannot read a policy file or directory",
    "GW020": "unterminated string",
    "GW021": "nesting too deep",
    "GW022": "policy set is empty",
    "GW101": "rule can never match",
    "GW102": "rule is fully shadowed by a rule of higher precedence",
    "GW103": "include adds nothing",
    "GW104": "a default exceeds the cap of the same rule",
    "GW105": "rule decides nothing",
}


class Span(NamedTuple):
    """A place in a source file; lines and columns are 1-based, `end_col` is exclusive.

    A named tuple rather than a frozen dataclass: a large policy has hundreds of thousands of
    spans, and a tuple is built three times faster (immutable, hashable and ordered alike)."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @classmethod
    def point(cls, file: str, line: int = 1, col: int = 1) -> Span:
        return cls(file, line, col, line, col + 1)

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.col,
            "end_line": self.end_line,
            "end_column": self.end_col,
        }


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    span: Span
    message: str
    hint: str | None = None
    # The text of the line the span starts on, for the caret snippet ("" when unknown).
    source_line: str = ""
    # Further places that explain this one (e.g. the other end of a duplicate), rendered as notes.
    related: tuple[tuple[Span, str], ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def render(self) -> str:
        """`file:line:col: error[GW012]: message`, the source line, a caret under the span."""
        s = self.span
        message = _clip_quoted(self.message)
        out = [f"{s.file}:{s.line}:{s.col}: {self.severity.value}[{self.code}]: {message}"]
        if self.source_line:
            line = self.source_line.rstrip("\n").expandtabs(1)
            width = max(1, (s.end_col - s.col) if s.end_line == s.line else len(line) - s.col + 1)
            start = s.col - 1
            if len(line) > SNIPPET_WIDTH:  # a hostile 1 MB line: a window around the caret
                first = max(0, start - SNIPPET_WIDTH // 4)
                line = ("..." if first else "") + line[first:first + SNIPPET_WIDTH] + "..."
                start = start - first + (3 if first else 0)
                width = min(width, SNIPPET_WIDTH - (start - (3 if first else 0)))
            out.append(f" {line}")
            out.append(" " + " " * start + "^" * max(1, width))
        if self.hint:
            out.append(f"  = hint: {_clip_quoted(self.hint)}")
        for span, note in self.related:
            out.append(f"  = note: {span.file}:{span.line}:{span.col}: {note}")
        return "\n".join(out)

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "hint": self.hint,
            **self.span.to_json(),
            "related": [{**sp.to_json(), "message": note} for sp, note in self.related],
        }


SNIPPET_WIDTH = 160
_LONG_QUOTE = re.compile(r"([`\"])([^`\"\n]{81,})\1")


def _clip_quoted(text: str) -> str:
    """A quoted token (`...` or "...") of more than 80 characters is cut in a message or hint,
    saying how long it was: a hostile 1 MB name must not make a 1 MB diagnostic."""
    return _LONG_QUOTE.sub(lambda m: f"{m[1]}{m[2][:60]}...{m[1]} ({len(m[2])} characters)",
                           text)


def source_lines(text: str) -> list[str]:
    """Lines as the parser counts them: split at "\n" only (not at form feeds or U+2028,
    which `str.splitlines` would also split at)."""
    if "\r" not in text:
        return text.split("\n")
    return [line.removesuffix("\r") for line in text.split("\n")]


def line_at(lines: Sequence[str], line: int) -> str:
    """Line `line` (1-based) of a file's `lines`, for a diagnostic's snippet; "" when the file
    has no such line."""
    return lines[line - 1] if 0 < line <= len(lines) else ""


def render_all(diagnostics: Iterable[Diagnostic]) -> str:
    return "\n".join(d.render() for d in diagnostics)


def _distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance, case-insensitive."""
    a, b = a.lower(), b.lower()
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice nearest to `word` if it is near enough to be a plausible typo."""
    best: tuple[int, str] | None = None
    for choice in choices:
        if abs(len(word) - len(choice)) > 3:  # never within the limit below; and a 1 MB
            continue                          # unknown word must not cost seconds
        d = _distance(word, choice)
        if best is None or d < best[0]:
            best = (d, choice)
    if best is None:
        return None
    limit = 1 if len(word) <= 3 else 2 if len(word) <= 6 else 3
    return best[1] if best[0] <= limit else None
