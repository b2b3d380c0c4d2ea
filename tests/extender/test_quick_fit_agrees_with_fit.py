"""The filter's fast path (`quick_fits` over a node summary) decides exactly as `fit` does,
wherever it decides: random nodes, usages and single-container requests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.annotations import GpuDevice, NodeInventory
from gpuwarden.placement import (
    ContainerRequest,
    Fit,
    NodeState,
    PodRequest,
    Selectors,
    Usage,
    fit,
    node_summary,
    quick_fits,
)
from policy import load_texts

POLICY = load_texts([("p.gwp", "version 1\ndefaults {\n  gpumem = 5000MiB\n}\n")]).policy
assert POLICY is not None


def rule(gpu: int, mib: int | None, pct: int | None, cores: int) -> object:
    from policy.model import ResourceRequest, Workload

    return POLICY.evaluate(Workload(name="p", container="c", request=ResourceRequest(
        gpu=gpu, gpumem_mib=mib, gpumem_percentage=pct, gpucores=cores)))


devices = st.lists(st.tuples(st.sampled_from([1000, 16384, 81920]), st.booleans(),
                             st.integers(0, 20000), st.sampled_from([0, 20, 50, 100]),
                             st.integers(0, 4), st.sampled_from(["NVIDIA H200", "NVIDIA A100"])),
                   min_size=0, max_size=6)
type_lists = st.lists(st.sampled_from(["h200", "a100", "nvidia"]), max_size=2).map(tuple)


@settings(max_examples=400, deadline=None)
@given(devices, st.integers(1, 4), st.one_of(st.none(), st.integers(1, 90000)),
       st.one_of(st.none(), st.integers(1, 100)), st.sampled_from([0, 10, 50, 100]),
       st.integers(1, 4), type_lists, type_lists)
def test_quick_fits_matches_fit(devs: list[tuple[int, bool, int, int, int, str]], count: int,
                                mib: int | None, pct: int | None, cores: int, split: int,
                                use: tuple[str, ...], nouse: tuple[str, ...]) -> None:
    inv = NodeInventory(tuple(GpuDevice(f"G{i}", i, m, 100, kind, 0, healthy)
                              for i, (m, healthy, _, _, _, kind) in enumerate(devs)), split)
    used = {f"G{i}": Usage(mem, c, s) for i, (_, _, mem, c, s, _) in enumerate(devs)}
    node = NodeState("n", inv, used)
    pod = PodRequest((ContainerRequest("c", rule(count, mib, None if mib else pct, cores)),),
                     Selectors(use, nouse))
    quick = quick_fits(node_summary(node), pod)
    assert quick is not None
    assert quick == isinstance(fit(node, pod), Fit)


def test_quick_fits_leaves_other_shapes_to_fit() -> None:
    node = NodeState("n", NodeInventory((GpuDevice("G0", 0, 1000),)))
    two = PodRequest((ContainerRequest("a", rule(1, 10, None, 0)),
                      ContainerRequest("b", rule(1, 10, None, 0))))
    picky = PodRequest((ContainerRequest("a", rule(1, 10, None, 0)),),
                       Selectors(use_uuids=("GPU-1",)))
    init = PodRequest((ContainerRequest("a", rule(1, 10, None, 0), init=True),))
    assert [quick_fits(node_summary(node), p) for p in (two, picky, init)] == [None] * 3
