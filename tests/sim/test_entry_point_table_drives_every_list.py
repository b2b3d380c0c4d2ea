"""libvgpu/include/hooks.def is the one table of CUDA entry points: the shim's version script,
the eBPF probe list and the event kinds (C and Python) all come from it, and everything it names
exists where it must: each hook in the API lists whose prototypes the shim compiles against (and
which the simulated driver exports), each probe's functions in the BPF program."""

from __future__ import annotations

import re
from pathlib import Path

import sim_headercheck

from bpf.probes import PROBES, REQUIRED_SYMBOLS, Family
from bpf.structs import EventKind
from libvgpu.entry_points import rows
from libvgpu.paths import build_dir

REPO = Path(__file__).resolve().parents[2]
AUDIT_C = (REPO / "bpf" / "progs" / "audit.c").read_text()


def _hooks(macro: str) -> list[str]:
    return [row[0] for row in rows(macro)]


def test_the_version_script_exports_the_hooks_and_dlsym_only() -> None:
    script = (build_dir() / "libvgpu.map").read_text()
    globals_, locals_ = script.split("local:")
    assert set(re.findall(r"(\w+);", globals_)) == {
        *_hooks("VGPU_CUDA_HOOK"), *_hooks("VGPU_NVML_HOOK"), "dlsym"}
    assert locals_.split() == ["*;", "};"]


def test_every_hook_has_a_prototype_in_the_api_lists() -> None:
    # The simulated driver exports exactly the main lists (test_exported_symbols_match_...);
    # the extra list holds the variants only the shim needs (per-thread default stream).
    api = sim_headercheck.function_names()
    assert set(_hooks("VGPU_CUDA_HOOK")) - {*api["cuda"], *api["cuda_extra"]} == set()
    assert set(_hooks("VGPU_NVML_HOOK")) - set(api["nvml"]) == set()


def test_the_probe_list_is_the_table_s_and_every_function_it_names_exists() -> None:
    assert [(p.symbol, p.family.value, p.entry, p.ret or "none") for p in PROBES] == [
        tuple(row) for row in rows("VGPU_CUDA_PROBE")]
    assert len({p.symbol for p in PROBES}) == len(PROBES)
    assert set(REQUIRED_SYMBOLS) <= {p.symbol for p in PROBES if p.family is Family.ALLOC} | {
        p.symbol for p in PROBES if p.family is Family.FREE}
    defined = set(re.findall(r"^int (gw_\w+)\(struct pt_regs \*ctx\)", AUDIT_C, re.M))
    named = {p.entry for p in PROBES} | {p.ret for p in PROBES if p.ret}
    assert named - defined == set(), "hooks.def names BPF functions audit.c does not define"


def test_event_kinds_are_the_table_s_and_every_kind_the_program_uses_is_declared() -> None:
    table = [(name, int(value)) for name, value in rows("VGPU_EVENT_KIND")]
    assert [(k.name, k.value) for k in EventKind] == table
    assert len({v for _, v in table}) == len(table)
    used = set(re.findall(r"\bGW_KIND_(\w+)", AUDIT_C))
    assert used - {k.name for k in EventKind} == set()
