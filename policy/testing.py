"""`gpuwarden policy test`: table-driven policy tests, workloads in and expected fields out.

The suite is a mapping (the CLI reads it from YAML): `tests:` is a list of cases, each with a
`name`, a `workload:` (or a `pod:` manifest and optional `container:`) and an `expect:` mapping;
an optional top-level `unmanaged: {expect: ...}` checks the unmanaged rule.  Every key is from a
closed set; a typo is reported, never ignored.  Pure: the CLI does the file reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwarden.resources import ResourceNames
from policy.compiler import CompiledPolicy
from policy.diagnostics import closest
from policy.loader import load_texts
from policy.model import EffectiveRule, ResourceRequest, ViolationResponse, Workload
from policy.pods import PodError, workloads_from_manifest
from policy.units import UnitError, format_mib, parse_percent, to_int
from policy.vocabulary import EFFECTIVE, FIELD, expect_mib

__all__ = ["EXPECT_KEYS", "CaseResult", "SuiteError", "run_suite"]

LINE_KEY = "__line__"  # the CLI's YAML loader records each mapping's line under this key
SUITE_KEYS = ("policy", "tests", "unmanaged")
CASE_KEYS = ("name", "workload", "pod", "pod_file", "container", "expect")
WORKLOAD_KEYS = ("namespace", "name", "labels", "annotations", "container", "node", "node_labels",
                 "request")
REQUEST_KEYS = ("gpu", "gpumem", "gpumem_percentage", "gpucores", "priority")
EXPECT_KEYS = ("denied", *(f.key for f in EFFECTIVE), "decided_by", "matched_rules")


class SuiteError(ValueError):
    """The test file itself is wrong (not a failing test)."""


@dataclass
class CaseResult:
    name: str
    line: int | None
    failures: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures and self.error is None


def _where(source: str, node: Mapping[str, object] | None) -> str:
    line = node.get(LINE_KEY) if isinstance(node, Mapping) else None
    return f"{source}:{line}" if line else source


def _check_keys(node: Mapping[str, object], allowed: tuple[str, ...], what: str,
                source: str) -> None:
    for key in node:
        if key == LINE_KEY:
            continue
        if key not in allowed:
            guess = closest(str(key), allowed)
            hint = f" (did you mean `{guess}`?)" if guess else ""
            raise SuiteError(f"{_where(source, node)}: unknown key `{key}` in {what}{hint}; "
                             f"valid: {', '.join(allowed)}")


def _clean_map(node: Mapping[Any, Any]) -> dict[Any, Any]:
    return {k: _clean(v) for k, v in node.items() if k != LINE_KEY}


def _clean(node: object) -> object:
    if isinstance(node, Mapping):
        return _clean_map(node)
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _mem_request(value: object, where: str) -> int:
    try:
        return expect_mib(value)
    except (UnitError, ValueError) as err:
        raise SuiteError(f"{where}: request gpumem {value!r}: {err}") from None


def _workload(case: Mapping[str, object], source: str, names: ResourceNames) -> Workload:
    where = _where(source, case)
    if "pod_file" in case:  # the CLI replaces it by `pod:`; the pure API cannot read files
        raise SuiteError(f"{where}: `pod_file` must be read by the caller (gpuwarden policy test)")
    if ("workload" in case) == ("pod" in case):
        raise SuiteError(f"{where}: a test case needs exactly one of `workload:` or `pod:`")
    if "pod" in case:
        try:
            pods = workloads_from_manifest(_clean(case["pod"]), where, names)
        except PodError as err:
            raise SuiteError(str(err)) from None
        want = case.get("container")
        for p in pods:
            if (want is None and p.uses_gpu) or p.container == want:
                return p.workload
        raise SuiteError(f"{where}: no container {want!r} using a GPU in the pod" if want else
                         f"{where}: no container in the pod asks for a GPU resource")
    raw = case["workload"]
    if not isinstance(raw, Mapping):
        raise SuiteError(f"{where}: `workload` must be a mapping")
    _check_keys(raw, WORKLOAD_KEYS, "workload", source)
    req_raw = raw.get("request") or {}
    if not isinstance(req_raw, Mapping):
        raise SuiteError(f"{where}: `request` must be a mapping")
    _check_keys(req_raw, REQUEST_KEYS, "request", source)
    prio = req_raw.get("priority")
    if prio is not None:
        prio = {"high": 0, "low": 1, 0: 0, 1: 1}.get(prio)
        if prio is None:
            raise SuiteError(f"{where}: request priority must be high, low, 0 or 1")
    gpumem = req_raw.get("gpumem")
    try:
        req = ResourceRequest(
            gpu=to_int(req_raw["gpu"]) if "gpu" in req_raw else (
                1 if not req_raw else None),
            gpumem_mib=None if gpumem is None else _mem_request(gpumem, where),
            gpumem_percentage=_opt_int(req_raw.get("gpumem_percentage")),
            gpucores=_opt_int(req_raw.get("gpucores")),
            priority=prio,
        )
        strings: dict[str, Mapping[Any, Any]] = {}
        for k in ("labels", "annotations", "node_labels"):
            v = _clean(raw.get(k) or {})
            if not isinstance(v, Mapping):
                raise SuiteError(f"{where}: `{k}` must be a mapping")
            strings[k] = v
        return Workload(
            namespace=str(raw.get("namespace", "default")), name=str(raw.get("name", "")),
            labels={str(a): str(b) for a, b in strings["labels"].items()},
            annotations={str(a): str(b) for a, b in strings["annotations"].items()},
            container=str(raw.get("container", "")), node=str(raw.get("node", "")),
            node_labels={str(a): str(b) for a, b in strings["node_labels"].items()},
            request=req,
        )
    except (TypeError, ValueError) as err:
        if isinstance(err, SuiteError):
            raise
        raise SuiteError(f"{where}: bad workload: {err}") from None


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.endswith("%"):
        return parse_percent(value)
    return to_int(value)


def _violation(value: object, where: str) -> ViolationResponse | dict[str, object]:
    if isinstance(value, Mapping):
        return _clean_map(value)
    if not isinstance(value, str):
        raise SuiteError(f"{where}: expected on_violation must be a string or a mapping")
    result = load_texts([("<expect>", f"version 1\ndefaults {{\n  on_violation = {value}\n}}\n")])
    if result.policy is None:
        msg = result.errors[0].message if result.errors else "invalid"
        raise SuiteError(f"{where}: expected on_violation {value!r}: {msg}")
    response = result.policy.defaults["on_violation"].value
    assert isinstance(response, ViolationResponse)  # what parse_violation makes
    return response


def _compare(key: str, want: object, rule: EffectiveRule, where: str) -> str | None:
    """None when `rule` has what `want` says for `key`, else a failure line."""
    got: object
    try:
        if key == "denied":
            got = rule.denied
            if want is False or want is None:
                ok = got is None
            elif want is True:
                ok = got is not None
            else:
                ok = got is not None and str(want) in got
            return None if ok else f"denied: expected {want!r}, got {got!r}"
        if key == "gpu":
            ok = rule.gpu == to_int(want)
            return None if ok else f"gpu: expected {want}, got {rule.gpu}"
        if key == "gpumem":
            if rule.gpumem_mib is not None:
                shown = format_mib(rule.gpumem_mib)
            else:
                pct = rule.gpumem_percentage
                shown = f"{pct}%" if pct is not None else "whole"
            if want == "whole":
                ok = rule.gpumem_mib is None and rule.gpumem_percentage is None
            elif isinstance(want, str) and want.endswith("%"):
                ok = rule.gpumem_percentage == parse_percent(want)
            else:
                ok = rule.gpumem_mib == _mem_request(want, where)
            return None if ok else f"gpumem: expected {want}, got {shown}"
        if key == "gpucores":
            cores = parse_percent(want) if isinstance(want, str) else to_int(want)
            ok = rule.gpucores == cores
            return None if ok else f"gpucores: expected {want}, got {rule.gpucores}%"
        if key == "priority":
            prio = {"high": 0, "low": 1, 0: 0, 1: 1}.get(want)
            if prio is None:
                raise SuiteError(f"{where}: expected priority must be high, low, 0 or 1")
            got = "high" if rule.priority == 0 else "low"
            return None if rule.priority == prio else f"priority: expected {want}, got {got}"
        if key == "on_violation":
            response = _violation(want, where)
            got = rule.on_violation
            if isinstance(response, dict):
                bad = {k: v for k, v in response.items() if getattr(got, k, object()) != v}
                ok = not bad
            else:
                ok = got == response
            return None if ok else f"on_violation: expected {want}, got {got.describe()}"
        plain = FIELD.get(key)
        if plain is not None and plain.expect is not None and plain.explain is not None:
            got = getattr(rule, plain.attr)
            if got == plain.expect(want):
                return None
            return f"{key}: expected {want}, got {plain.explain(rule)}"
        if key == "decided_by":
            if not isinstance(want, Mapping):
                raise SuiteError(f"{where}: expected decided_by must be a mapping")
            lines = [f"decided_by[{k}]: expected {v!r}, got {rule.decided_by.get(str(k))!r}"
                     for k, v in _clean_map(want).items()
                     if rule.decided_by.get(str(k)) != v]
            return "; ".join(lines) or None
        if key == "matched_rules":
            got = list(rule.matched_rules)
            ok = got == list(want)  # type: ignore[call-overload]  # YAML; list() of a scalar raises
            return None if ok else f"matched_rules: expected {want}, got {got}"
    except (UnitError, TypeError, ValueError) as err:
        if isinstance(err, SuiteError):
            raise
        raise SuiteError(f"{where}: expected {key} {want!r} is not valid: {err}") from None
    raise SuiteError(f"{where}: unknown expectation `{key}`")  # pragma: no cover


def _expect(node: object, rule: EffectiveRule, source: str,
            owner: Mapping[str, object]) -> list[str]:
    if not isinstance(node, Mapping) or not node:
        raise SuiteError(f"{_where(source, owner)}: `expect` must be a non-empty mapping")
    _check_keys(node, EXPECT_KEYS, "expect", source)
    where = _where(source, node)
    out = []
    for key, want in node.items():
        if key == LINE_KEY:
            continue
        msg = _compare(str(key), want, rule, where)
        if msg:
            reason = rule.reasons.get(str(key))
            out.append(msg + (f" ({reason})" if reason else ""))
    return out


def run_suite(doc: object, policy: CompiledPolicy, source: str,
              names: ResourceNames | None = None) -> list[CaseResult]:
    """Run every case; raises SuiteError for a malformed suite (its first problem)."""
    names = names or ResourceNames()
    if not isinstance(doc, Mapping):
        raise SuiteError(f"{source}: a test file is a mapping with `tests:`")
    _check_keys(doc, SUITE_KEYS, "the test file", source)
    cases = doc.get("tests")
    if not isinstance(cases, list) or not cases:
        raise SuiteError(f"{_where(source, doc)}: `tests` must be a non-empty list")
    results: list[CaseResult] = []
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping):
            raise SuiteError(f"{source}: tests[{i}] must be a mapping")
        _check_keys(case, CASE_KEYS, "a test case", source)
        name = str(case.get("name") or f"tests[{i}]")
        if name in seen:
            raise SuiteError(f"{_where(source, case)}: duplicate test name {name!r}")
        seen.add(name)
        line = case.get(LINE_KEY)
        result = CaseResult(name, line if isinstance(line, int) else None)
        workload = _workload(case, source, names)
        if "expect" not in case:
            raise SuiteError(f"{_where(source, case)}: test {name!r} has no `expect`")
        result.failures = _expect(case["expect"], policy.evaluate(workload), source, case)
        results.append(result)
    unmanaged = doc.get("unmanaged")
    if unmanaged is not None:
        if not isinstance(unmanaged, Mapping):
            raise SuiteError(f"{source}: `unmanaged` must be a mapping with `expect:`")
        _check_keys(unmanaged, ("expect",), "unmanaged", source)
        line = unmanaged.get(LINE_KEY)
        result = CaseResult("unmanaged", line if isinstance(line, int) else None)
        result.failures = _expect(unmanaged.get("expect"), policy.unmanaged, source, unmanaged)
        results.append(result)
    return results
