"""The policy/priority table of docs/compute.md, row by row, against lim_decide (every input
combination is dumped by the driver; each documented rule is checked over all rows it covers)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

DEFAULT, FORCE, DISABLE = 0, 1, 2
HIGH, LOW = 0, 1
AGENT_UNLIMITED = 101
AUTO, YIELD, RUN = 0, 1, 2


class Row(NamedTuple):
    policy: int
    priority: int
    limit: int
    agent_limit: int
    agent_yield: int
    node_known: int
    others_high: int
    others_low: int
    light: int
    others_light: int
    others_paced: int
    others_paced_pct: int
    others_capped_pct: int
    others_rest_pct: int
    rest_pct: int
    out_limit: int
    out_yield: int
    out_share: int
    out_capped: int
    out_rest: int

    @property
    def alone(self) -> bool:
        return bool(self.node_known) and not (self.others_high or self.others_low
                                              or self.others_light)

    @property
    def no_agent(self) -> bool:
        return self.agent_limit == 0 and self.agent_yield == AUTO


@pytest.fixture(scope="module")
def rows(limiter_driver) -> list[Row]:
    out = []
    for line in limiter_driver.run("decide").splitlines():
        left, right = line.split("->")
        out.append(Row(*map(int, left.split()), *map(int, right.split())))
    # other paced members (none, one at 20, one at 70, one capped at 40, one with no gpucores at
    # the 70 a 30 leaves) only beside an active low
    assert len(out) == 3 * 2 * 3 * 3 * 3 * 2 * 2 * (1 + 5) * 2 * 2
    return out


def held(limit: int) -> int:
    """The limit a held workload is paced to: 100 % is the whole GPU, i.e. not paced."""
    return 0 if limit >= 100 else limit


def test_alone_is_never_held_back_under_default(rows: list[Row]) -> None:
    for r in rows:
        if r.policy == DEFAULT and r.alone and r.no_agent:
            assert (r.out_limit, r.out_yield) == (0, 0), r


def test_low_priority_sharing_is_held_to_gpucores(rows: list[Row]) -> None:
    for r in rows:
        if (r.policy == DEFAULT and r.priority == LOW and r.no_agent and
                (r.others_high or r.others_low or not r.node_known) and
                not (r.node_known and r.others_paced) and not r.out_rest):
            # (what one with no gpucores takes: test_no_gpucores_beside_paced_ones_...)
            assert r.out_limit == held(r.limit), r


def test_paced_lows_split_what_their_shares_leave_in_proportion(rows: list[Row]) -> None:
    # `default`: a share is a weight (cpu.weight): 30 beside a paced 20 is paced to 60, beside
    # a paced 70 to its 30, beside a capped 40 (cpu.max) to the 60 that leaves; it takes turns
    # by its 30 either way
    seen = set()
    for r in rows:
        if (r.policy == DEFAULT and r.priority == LOW and r.no_agent and r.node_known and
                r.others_paced and r.out_share and not r.out_rest):
            total = r.limit + r.others_paced_pct
            weights = total - r.others_capped_pct
            left = 100 - r.others_capped_pct
            want = -(-r.limit * left // weights) if total < 100 else r.limit
            assert (r.out_limit, r.out_share, r.out_capped) == (held(want), held(r.limit), 0), r
            seen.add((r.limit, r.others_paced_pct, r.out_limit))
    assert seen == {(30, 20, 60), (30, 70, 30), (30, 40, 60)}


def test_no_gpucores_beside_paced_ones_takes_what_their_shares_leave(rows: list[Row]) -> None:
    # a `default` low with no gpucores (or 100) beside containers paced by theirs takes turns by
    # what those leave (lim_rest_share): beside a 20, 80; a 70, 30; a capped 40, 60; beside only
    # another such container, nothing to take turns with: not paced.  Found light, it keeps the
    # share it took (50 in the table) while other lows are active (they wait for its claims and
    # leave the turns).  The agent's limit, where it writes one, replaces it
    seen = set()
    for r in rows:
        if not (r.policy == DEFAULT and r.priority == LOW and r.node_known
                and r.limit in (0, 100)):
            continue
        if not r.no_agent and r.agent_limit:
            assert r.out_rest == 0, r
            continue
        configured = r.others_paced_pct - r.others_rest_pct
        want = (max(5, 100 - configured) if configured
                else r.rest_pct if r.light and r.others_low else 0)
        assert (r.out_limit, r.out_share, r.out_rest, r.out_capped) == (
            want, want, 1 if want else 0, 0), r
        seen.add((r.others_paced_pct, r.others_rest_pct, r.light, r.out_limit))
    assert seen >= {(20, 0, 0, 80), (70, 0, 0, 30), (40, 0, 0, 60), (70, 70, 0, 0),
                    (70, 70, 1, 50), (0, 0, 1, 50), (0, 0, 0, 0)}, seen


def test_rest_is_one_rule_under_every_other_view(rows: list[Row]) -> None:
    # only a `default` low with no gpucores of its own takes the rest
    for r in rows:
        if r.out_rest:
            assert (r.policy, r.priority, r.limit in (0, 100), r.agent_limit) == (
                DEFAULT, LOW, True, 0), r


def test_caps_are_published_as_caps(rows: list[Row]) -> None:
    # a share under `force` is a cap: the others do not scale it.  The agent's limit (its plan
    # writes a sharing container's gpucores) counts as the container's policy says
    for r in rows:
        if r.out_share:
            assert r.out_capped == (0 if r.policy == DEFAULT else 1), r


def test_a_low_beside_busy_light_neighbours_alone_is_not_held(rows: list[Row]) -> None:
    # a light neighbour is held to its own share and claims the GPU while busy: a `default` low
    # waits for its claims and takes the rest, without a pace of its own (the pace only cost it
    # the GPU's idle time between the light one's requests).  It waits launch by launch (the
    # claimers list, ticker.c), not by the verdict's yield, which takes it out of the turns
    for r in rows:
        if (r.policy == DEFAULT and r.priority == LOW and r.no_agent and r.node_known and
                r.others_light and not (r.others_high or r.others_low) and not r.light):
            assert (r.out_limit, r.out_yield) == (0, 0), r


def test_high_priority_is_not_held_to_gpucores_and_never_yields(rows: list[Row]) -> None:
    for r in rows:
        if r.policy == DEFAULT and r.priority == HIGH and r.no_agent:
            assert (r.out_limit, r.out_yield) == (0, 0), r


def test_low_priority_yields_while_high_priority_is_active(rows: list[Row]) -> None:
    for r in rows:
        if r.policy == FORCE and r.no_agent and r.priority == LOW:
            assert r.out_yield == (1 if r.others_high else 0), r


def test_under_default_only_a_busy_high_neighbour_makes_a_low_yield(rows: list[Row]) -> None:
    # a light container (using under 90 % of its share lately) claims the GPU while busy, and
    # `default` lows wait for its claims launch by launch, as for a high one's; but the verdict
    # yields (out of the turns, the pace cut short) only for a high one: a light one's claims
    # are a request and 0.4 ms each, and a tick that fell in one took a member out of the turns
    # for 10 ms and the others' windows with it
    for r in rows:
        if r.policy == DEFAULT and r.no_agent and r.priority == LOW:
            assert r.out_yield == (1 if r.others_high else 0), r


def test_a_light_container_is_held_to_its_share_beside_whoever_is_busy(rows: list[Row]) -> None:
    for r in rows:
        if (r.policy == DEFAULT and r.priority == LOW and r.no_agent and r.light and
                not r.alone and not r.others_paced and not r.out_rest):
            assert r.out_limit == held(r.limit), r


def test_force_holds_every_priority_even_alone(rows: list[Row]) -> None:
    for r in rows:
        if r.policy == FORCE and r.no_agent:
            assert r.out_limit == held(r.limit), r


def test_disable_never_holds_back(rows: list[Row]) -> None:
    for r in rows:
        if r.policy == DISABLE and r.no_agent:
            assert (r.out_limit, r.out_yield) == (0, 0), r


def test_unknown_sharing_takes_the_safe_side(rows: list[Row]) -> None:
    # Without the node region a low-priority workload is treated as sharing: held, not freed.
    for r in rows:
        if r.policy == DEFAULT and r.priority == LOW and not r.node_known and r.no_agent:
            assert r.out_limit == held(r.limit), r


def test_agent_overrides_win(rows: list[Row]) -> None:
    for r in rows:
        if r.agent_limit == AGENT_UNLIMITED:
            assert r.out_limit == 0, r
        elif r.agent_limit:
            assert r.out_share == r.agent_limit, r
            # under `default` a weight, scaled among paced ones as gpucores would be
            if not (r.policy == DEFAULT and r.node_known and r.others_paced):
                assert r.out_limit == r.agent_limit, r
        if r.agent_yield == YIELD:
            assert r.out_yield == 1, r
        elif r.agent_yield == RUN:
            assert r.out_yield == 0, r
