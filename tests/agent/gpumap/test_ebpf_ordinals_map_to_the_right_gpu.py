"""A process's CUDA ordinals are its own numbering: the eBPF ledger is charged to the GPU the
process means (agent/gpumap.py), from NVML's view of where it runs, else its environment, else
the node's order. Charging ordinal 0 of a pod on GPU 3 to GPU 0 would be a false bypass."""

from __future__ import annotations

import pytest

from agent.gpumap import ebpf_by_uuid, visible_gpus
from agent.model import GpuUuid, Pid

NODE = [f"GPU-{i}aaaaaaa-0000-0000-0000-00000000000{i}" for i in range(4)]
MiB = 2**20


@pytest.mark.parametrize(
    ("nvidia", "cuda", "expected"),
    [
        (None, None, None),  # nothing said: the node's order
        ("all", None, NODE),
        ("3", None, [NODE[3]]),  # a pod given GPU 3: its ordinal 0
        ("1,3", "1", [NODE[3]]),
        (None, "2,0", [NODE[2], NODE[0]]),  # reordered
        (NODE[2], None, [NODE[2]]),
        (NODE[1][:8], None, [NODE[1]]),  # a unique UUID prefix
        (None, "1,7,2", [NODE[1]]),  # CUDA stops at the first entry naming no GPU
        (None, "1,1", [NODE[1]]),  # ... and at a repeated one
        ("none", None, []),
        (None, "", []),
        ("MIG-abcd", None, None),  # MIG: not mapped here
    ],
)
def test_visible_gpus_reads_the_environment_as_cuda_does(nvidia, cuda, expected) -> None:
    assert visible_gpus(nvidia, cuda, NODE) == expected


def never_asked(pid: Pid) -> None:
    raise AssertionError(f"the environment of {pid} was read although NVML placed it")


def test_single_gpu_node_never_reads_the_environment() -> None:
    out = ebpf_by_uuid({5: {0: 1 * MiB, -1: 1 * MiB}}, NODE[:1], {}, never_asked)
    assert out == {Pid(5): {GpuUuid(NODE[0]): 2 * MiB}}


def test_pod_on_gpu_3_is_charged_to_gpu_3_from_its_environment() -> None:
    ledger = {100: {0: 500 * MiB}}
    out = ebpf_by_uuid(ledger, NODE, {}, {Pid(100): visible_gpus("3", None, NODE)}.get)
    assert out == {Pid(100): {GpuUuid(NODE[3]): 500 * MiB}}


def test_nvml_placement_wins_over_the_environment() -> None:
    # set in Python after exec (os.environ["CUDA_VISIBLE_DEVICES"] = "2"): /proc shows nothing,
    # NVML shows where the context is
    ledger = {7: {0: 3 * MiB}}
    out = ebpf_by_uuid(ledger, NODE, {Pid(7): [NODE[2]]}, never_asked)
    assert out == {Pid(7): {GpuUuid(NODE[2]): 3 * MiB}}


def test_several_gpus_keep_their_relative_order() -> None:
    ledger = {9: {0: 1 * MiB, 1: 2 * MiB}}
    out = ebpf_by_uuid(ledger, NODE, {Pid(9): [NODE[1], NODE[3]]}, never_asked)
    assert out == {Pid(9): {GpuUuid(NODE[1]): 1 * MiB, GpuUuid(NODE[3]): 2 * MiB}}


def test_nvml_not_matching_the_ordinals_falls_back_to_the_environment() -> None:
    # NVML (sampled every 1-2 s) does not list the new process yet
    ledger = {5: {0: 1 * MiB, 1: 1 * MiB}}
    out = ebpf_by_uuid(ledger, NODE, {Pid(5): [NODE[0]]}, {Pid(5): [NODE[2], NODE[1]]}.get)
    assert out == {Pid(5): {GpuUuid(NODE[2]): 1 * MiB, GpuUuid(NODE[1]): 1 * MiB}}


def test_without_any_hint_the_ordinal_is_the_node_index() -> None:
    out = ebpf_by_uuid({5: {2: 4 * MiB}}, NODE, {}, {}.get)
    assert out == {Pid(5): {GpuUuid(NODE[2]): 4 * MiB}}


def test_unknown_device_goes_to_the_process_s_only_gpu() -> None:
    out = ebpf_by_uuid({5: {-1: 4 * MiB}}, NODE, {}, {Pid(5): [NODE[3]]}.get)
    assert out == {Pid(5): {GpuUuid(NODE[3]): 4 * MiB}}
    out = ebpf_by_uuid({5: {-1: 4 * MiB}}, NODE, {}, {}.get)
    assert out == {Pid(5): {GpuUuid(NODE[0]): 4 * MiB}}


def test_an_ordinal_beyond_what_the_process_sees_is_not_charged_to_a_real_gpu() -> None:
    out = ebpf_by_uuid({5: {1: 4 * MiB}}, NODE, {}, {Pid(5): [NODE[3]]}.get)
    assert out == {Pid(5): {GpuUuid("device-1"): 4 * MiB}}
    assert ebpf_by_uuid({5: {0: 0}}, NODE, {}, {}.get) == {}
