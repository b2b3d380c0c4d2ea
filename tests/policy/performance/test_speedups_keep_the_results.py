"""The load-time shortcuts change when work is done, not what comes out: the digest is still
sha256 of the canonical JSON with sorted keys, predicates compiled on first use decide as the
expression says, and a load leaves the garbage collector as it found it."""

from __future__ import annotations

import gc
import hashlib
import json
import sys
from pathlib import Path

import pytest

from policy import ResourceRequest, Workload, load_policy, load_texts
from policy.compiled import UNCOMPILED

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
from bench_policy import policy_text  # noqa: E402


def test_digest_is_sha256_of_the_sorted_canonical_json() -> None:
    for result in (load_policy([REPO / "examples" / "policies"]),
                   load_texts([("b.gwp", policy_text(300, scanned=20, by_label=40))])):
        policy = result.policy
        assert policy is not None, result.diagnostics[:3]
        text = json.dumps(policy.canonical(), sort_keys=True, separators=(",", ":"))
        assert policy.digest == hashlib.sha256(text.encode()).hexdigest()


def test_predicates_are_compiled_when_first_needed_and_decide_alike() -> None:
    policy = load_texts([("b.gwp", policy_text(300, scanned=20, by_label=40))]).policy
    assert policy is not None
    assert all(r._predicate is UNCOMPILED for r in policy.rules if r.expr is not None)
    w = Workload(namespace="team-42", name="x", labels={"team": "t0", "tier": "web"},
                 request=ResourceRequest(gpu=1))
    matched = [r.name for r in policy.matching(w)]
    compiled = {r.name for r in policy.rules if r._predicate is not UNCOMPILED}
    assert compiled and len(compiled) < len(policy.rules) // 5  # only the index's candidates
    assert set(matched) <= compiled
    assert sorted(matched) == sorted(r.name for r in policy.rules if r.matches(w))


@pytest.mark.parametrize("enabled", [True, False])
def test_a_load_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert load_texts([("b.gwp", policy_text(50, scanned=5, by_label=5))]).ok
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable() if was else gc.disable()


def test_a_caller_s_frozen_objects_stay_frozen() -> None:
    mine = [object()]  # a container of the caller's, tracked by the collector
    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0
        assert load_texts([("b.gwp", policy_text(50, scanned=5, by_label=5))]).ok
        # still in the permanent generation: in none of the three collected ones (the count of
        # frozen objects is no proof: a frozen object freed meanwhile, a cache entry, lowers it)
        assert not any(o is mine for g in range(3) for o in gc.get_objects(generation=g))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert any(o is mine for g in range(3) for o in gc.get_objects(generation=g))  # the probe works
