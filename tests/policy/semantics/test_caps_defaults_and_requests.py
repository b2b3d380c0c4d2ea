"""Requests, defaults and caps: clamp vs deny, defaults always clamped, percentages, cores 0 =
no limit, priority forced by a rule, the memory limit in bytes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuwarden.limit import memory_limit
from policy import CompiledPolicy, ResourceRequest, Workload

MIB = 1 << 20
GIB = 1 << 30
V = "version 1\n"


def rule(body: str) -> str:
    return V + 'rule "r" {\n' + body + "\n}\n"


def ev(p: CompiledPolicy, **req: int | None) -> object:
    return p.evaluate(Workload(request=ResourceRequest(**req)))


def test_request_below_cap_is_kept(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  cap gpumem <= 8GiB deny")), gpumem_mib=4096)
    assert (e.denied, e.gpumem_mib, e.decided_by["gpumem"]) == (None, 4096, "request")


def test_request_above_clamp_cap_is_lowered(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  cap gpumem <= 8GiB clamp")), gpumem_mib=10000)
    assert (e.denied, e.gpumem_mib, e.decided_by["gpumem"]) == (None, 8192, "r")
    assert "clamped" in e.reasons["gpumem"]


def test_cap_without_behaviour_clamps(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    assert ev(compile_ok(rule("  cap gpu <= 2")), gpu=3).gpu == 2


def test_request_above_deny_cap_is_denied(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  cap gpumem <= 8GiB, gpu <= 1 deny")), gpu=2, gpumem_mib=10000)
    assert e.denied == 'requested gpu 2 exceeds the cap 1 of rule "r"'
    assert e.decided_by["denied"] == "r"


def test_default_above_cap_is_clamped_even_with_deny(
    compile_ok: Callable[[str], CompiledPolicy],
) -> None:
    p = compile_ok(rule("  cap gpumem <= 8GiB, gpucores <= 30% deny")
                   + "defaults {\n  gpumem = whole\n  gpucores = 0%\n}\n")
    e = ev(p)
    assert (e.denied, e.gpumem_mib, e.gpucores) == (None, 8192, 30)


def test_cores_zero_means_no_limit_and_exceeds_a_cap(
    compile_ok: Callable[[str], CompiledPolicy],
) -> None:
    p = compile_ok(rule("  cap gpucores <= 50% deny"))
    assert ev(p, gpucores=0).denied is not None
    assert ev(p, gpucores=50).denied is None
    assert ev(compile_ok(rule("  cap gpucores <= 100% deny")), gpucores=0).denied is None


def test_rule_default_applies_only_when_not_requested(
    compile_ok: Callable[[str], CompiledPolicy],
) -> None:
    p = compile_ok(rule("  default gpumem = 4GiB, gpucores = 20%, gpu = 2, priority = high"))
    e = ev(p, gpu=None)
    assert (e.gpumem_mib, e.gpucores, e.gpu, e.priority) == (4096, 20, 2, 0)
    e = ev(p, gpu=1, gpumem_mib=1000, gpucores=5, priority=1)
    assert (e.gpumem_mib, e.gpucores, e.gpu, e.priority) == (1000, 5, 1, 1)
    assert e.decided_by["gpumem"] == "request"


def test_rule_priority_overrides_the_request(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  priority = low")), priority=0)
    assert (e.priority, e.decided_by["priority"]) == (1, "r")
    assert "request high overridden" in e.reasons["priority"]


def test_percentage_request_and_limit_bytes(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  mode = audit")), gpumem_percentage=25)
    assert (e.gpumem_mib, e.gpumem_percentage) == (None, 25)
    assert memory_limit(e, 80 * GIB).bytes == 20 * GIB


def test_cap_in_other_unit_travels_to_the_node(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  cap gpumem <= 8GiB deny")), gpumem_percentage=50)
    assert (e.denied, e.gpumem_percentage, e.gpumem_cap_mib) == (None, 50, 8192)
    assert memory_limit(e, 80 * GIB).bytes == 8 * GIB
    assert memory_limit(e, 10 * GIB).bytes == 5 * GIB


def test_node_label_gives_the_gpu_size(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(rule("  cap gpumem <= 8GiB deny"))
    w = Workload(node_labels={"nvidia.com/gpu.memory": "81920"},
                 request=ResourceRequest(gpumem_percentage=50))
    assert p.evaluate(w).denied is not None
    w = Workload(node_labels={"nvidia.com/gpu.memory": "81920"},
                 request=ResourceRequest(gpumem_percentage=5))
    assert p.evaluate(w).denied is None


def test_whole_gpu_default(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(V + "defaults {\n  gpumem = whole\n}\n"))
    assert (e.gpumem_mib, e.gpumem_percentage) == (None, None)
    assert memory_limit(e, 80 * GIB).bytes == 80 * GIB


def test_memory_limit_never_exceeds_the_gpu(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    e = ev(compile_ok(rule("  mode = audit")), gpumem_mib=100_000)
    assert memory_limit(e, 80 * GIB).bytes == 80 * GIB
    with pytest.raises(ValueError, match="gpu_total_bytes"):
        memory_limit(e, -1)


@pytest.mark.parametrize("text, action, grace, name, severity", [
    ("alert", "alert", 0.0, None, "warning"),
    ('alert "X" severity info', "alert", 0.0, "X", "info"),
    ("terminate after 1m", "terminate", 60.0, None, "critical"),
    ('kill after 500ms alert "Y" severity warning', "kill", 0.5, "Y", "warning"),
    ("kill after 0s", "kill", 0.0, None, "critical"),
])
def test_on_violation_forms(compile_ok: Callable[[str], CompiledPolicy], text: str, action: str,
                            grace: float, name: str | None, severity: str) -> None:
    r = compile_ok(rule(f"  on_violation = {text}")).evaluate(Workload()).on_violation
    assert (r.action, r.grace_seconds, r.alert_name, r.severity) == (action, grace, name, severity)


@pytest.mark.parametrize("text", ["kill 10s", "kill after", "kill after 10", "alert X",
                                  "page after 1s", 'kill after 1s alert', "alert severity loud",
                                  'alert "A" "B"'])
def test_bad_on_violation_is_gw017_or_unit(load: Callable[..., object], text: str) -> None:
    result = load(rule(f"  on_violation = {text}"))
    assert result.policy is None
    assert result.errors[0].code in ("GW017", "GW006", "GW007")


def test_settings_reach_the_effective_rule(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    p = compile_ok(rule("  core_policy = disable\n  compute_grace = 90s\n"
                        "  bypass_tolerance = 1GiB\n  mode audit"))
    e = p.evaluate(Workload())
    assert (e.core_policy, e.compute_grace_seconds, e.bypass_tolerance_mib, e.mode) == (
        "disable", 90.0, 1024, "audit")
    assert e.to_json()["decided_by"]["bypass_tolerance"] == "r"


def test_unmanaged_block_and_its_builtins(compile_ok: Callable[[str], CompiledPolicy]) -> None:
    builtin = compile_ok(V).unmanaged
    assert (builtin.gpumem_mib, builtin.mode, builtin.on_violation.action) == (0, "audit", "alert")
    p = compile_ok(V + "defaults {\n  compute_grace = 5s\n}\n"
                   "unmanaged {\n  gpumem = 1GiB\n  mode = enforce\n"
                   "  on_violation = kill after 5s\n}\n")
    u = p.unmanaged
    assert (u.gpumem_mib, u.mode, u.on_violation.action, u.on_violation.grace_seconds) == (
        1024, "enforce", "kill", 5.0)
    assert (u.compute_grace_seconds, u.decided_by["compute_grace"]) == (5.0, "defaults")
    assert u.decided_by["gpumem"] == "unmanaged"
