"""The standalone admission plan (agent.admission) on literals: the GPUs a request gets, its
limit on each, the environment, and the refusals, with no region, record or socket."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.admission import (
    MARKER_ENV,
    Held,
    Plan,
    Refusal,
    parse_request,
    plan_admission,
    workload_env,
)
from agent.rules import policy_workload
from gpuwarden.limit import MemoryLimit
from policy.loader import load_policy

GIB = 1 << 30
POLICY = """version 1
defaults {
  gpumem = 1GiB
  gpucores = 30%
  on_violation = kill after 0s
}
rule "no-banned" {
  match namespace == "banned"
  deny "this namespace may not use GPUs"
}
"""


@dataclass(frozen=True)
class Gpu:
    uuid: str
    index: int
    name: str
    total_bytes: int


GPUS = (Gpu("GPU-a", 0, "sim", 4 * GIB), Gpu("GPU-b", 1, "sim", 4 * GIB))


def _rule(tmp_path: Path, namespace: str,
          request: dict[str, int | None] | None = None) -> Any:
    (tmp_path / "p.gwp").write_text(POLICY)
    loaded = load_policy([tmp_path / "p.gwp"])
    assert loaded.ok and loaded.policy is not None, loaded.diagnostics
    return loaded.policy.evaluate(policy_workload(namespace, "job", {}, request or {}))


def test_a_request_gets_the_least_used_gpu_its_limit_and_the_shim_env(tmp_path: Path) -> None:
    eff = _rule(tmp_path, "team")
    ask = parse_request({"name": "job", "namespace": "team"})
    held = [Held("main", ["GPU-a"], eff)]
    plan = plan_admission(ask, eff, "main", "node", GPUS, lambda: held, "")
    assert isinstance(plan, Plan)
    assert plan.devices == ["GPU-b"] and plan.limits == (MemoryLimit(GIB),)
    assert plan.gpucores == 30
    env = workload_env(plan, "team.job-1", "/r/team.job-1.region", "/lib/libvgpu.so",
                       "/other.so", len(GPUS))
    assert env["LD_PRELOAD"] == "/lib/libvgpu.so:/other.so"
    assert env["CUDA_DEVICE_MEMORY_LIMIT"] == env["CUDA_DEVICE_MEMORY_LIMIT_0"] == str(GIB)
    assert env["CUDA_DEVICE_SM_LIMIT"] == "30"
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-b"  # a subset of the machine's GPUs
    assert env[MARKER_ENV] == "team.job-1"


def test_a_denied_request_is_refused_with_the_policy_reason_and_no_placement(
        tmp_path: Path) -> None:
    eff = _rule(tmp_path, "banned")

    def never() -> list[Held]:
        raise AssertionError("a denied request is never placed")

    out = plan_admission(parse_request({"namespace": "banned"}), eff, "main", "node", GPUS,
                         never, "")
    assert isinstance(out, Refusal) and out.code == 1
    assert "this namespace may not use GPUs" in out.error
    assert out.event is not None and out.event["event"] == "admission_denied"


def test_no_gpu_is_refused_with_nvmls_reason(tmp_path: Path) -> None:
    eff = _rule(tmp_path, "team")
    out = plan_admission(parse_request({}), eff, "main", "node", (), list, "NVMLError: gone")
    assert isinstance(out, Refusal) and out.code == 2 and "NVMLError: gone" in out.error


def test_a_full_machine_refuses_and_says_so(tmp_path: Path) -> None:
    eff = _rule(tmp_path, "team", {"gpumem_mib": 3 * 1024})
    held = [Held("main", [g.uuid], eff) for g in GPUS]
    out = plan_admission(parse_request({}), eff, "main", "node", GPUS, lambda: held, "")
    assert isinstance(out, Refusal) and out.code == 1
    assert out.error.startswith("no GPU of this machine has room")
    assert out.event is not None and out.event["event"] == "admission_refused"


def test_a_gpu_takes_as_many_workloads_as_its_split_count(tmp_path: Path) -> None:
    eff = _rule(tmp_path, "team", {"gpumem_mib": 64, "gpucores": 5})  # slices run out first
    ask = parse_request({"name": "job", "namespace": "team"})
    one = (GPUS[0],)
    held = [Held(f"c{i}", ["GPU-a"], eff) for i in range(10)]
    refused = plan_admission(ask, eff, "main", "node", one, lambda: held, "")
    assert isinstance(refused, Refusal)
    assert "GPU0 all 10 slices taken" in refused.reply()["error"]  # the default, as in a cluster
    plan = plan_admission(ask, eff, "main", "node", one, lambda: held, "", split_count=11)
    assert isinstance(plan, Plan) and list(plan.devices) == ["GPU-a"]
