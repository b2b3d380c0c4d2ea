"""Fuzz of the control socket's requests (hypothesis, bounded): whatever bytes or JSON a local
user sends, the agent answers one JSON object with a boolean `ok`, never drops the connection
without an answer, and keeps serving: a well-formed request still works afterwards."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.control import ControlServer, request
from agent.daemon import Agent, AgentConfig

POLICY = ('version 1\n\ndefaults {\n  gpumem = 1GiB\n}\n\n'
          'rule "no" {\n  match namespace == "deny"\n  deny "not here"\n}\n')
GPU = "GPU-00000000-0000-0000-0000-000000000001"


class OneGpuNvml:
    """A pynvml stand-in: one 80 GiB GPU, nobody on it."""

    class NVMLError(Exception):
        value = 6

    NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED = 6, 3

    def nvmlInit(self) -> None: pass
    def nvmlShutdown(self) -> None: pass
    def nvmlDeviceGetCount(self) -> int: return 1
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int: return i
    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return type("M", (), {"total": 80 << 30, "used": 0})()
    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any: return type("U", (), {"gpu": 0})()
    def nvmlDeviceGetUUID(self, h: int) -> str: return GPU
    def nvmlDeviceGetName(self, h: int) -> str: return "Simulated"
    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]: return []
    def nvmlDeviceGetProcessUtilization(self, h: int, since: int) -> Any:
        raise self.NVMLError()


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("control-fuzz")
    (tmp / "p.gwp").write_text(POLICY)
    agent = Agent(AgentConfig(policy_paths=[str(tmp / "p.gwp")], state_dir=tmp / "state",
                              ebpf=False), nvml_lib=OneGpuNvml())
    agent.start()
    srv = ControlServer(agent.ledger.socket_path, agent, idle_seconds=2.0)
    srv.start()
    try:
        yield agent.ledger.socket_path
    finally:
        srv.close()
        agent.close()


def _send(sock_path: Path, data: bytes) -> dict[str, Any]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    try:
        s.connect(str(sock_path))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    finally:
        s.close()
    assert answer.endswith(b"\n"), f"no answer to {data[:200]!r}"
    doc = json.loads(answer)
    assert isinstance(doc, dict) and isinstance(doc.get("ok"), bool), doc
    return doc


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2, 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=4),
    max_leaves=12)
FIELDS = ["op", "name", "namespace", "labels", "request"]
REQUEST_KEYS = ["gpu", "gpumem_mib", "gpumem_percentage", "gpucores", "priority"]
requests = st.fixed_dictionaries(
    {"op": st.sampled_from(["admit", "status", "admit", "reboot"]) | json_values},
    optional={"name": json_values, "namespace": st.sampled_from(["default", "deny"]) | json_values,
              "labels": json_values,
              "request": st.dictionaries(st.sampled_from(REQUEST_KEYS) | st.text(max_size=8),
                                         json_values, max_size=4) | json_values})

FUZZ = settings(max_examples=150, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(req=requests)
def test_any_json_request_gets_one_answer(control: Path, req: dict[str, Any]) -> None:
    _send(control, json.dumps(req).encode() + b"\n")


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_get_one_answer(control: Path, data: bytes) -> None:
    _send(control, data)


def test_still_serving_after_the_fuzz(control: Path) -> None:
    assert request(control, {"op": "status"}, timeout=10)["ok"]
    answer = request(control, {"op": "admit", "name": "after", "request": {"gpumem_mib": 512}},
                     timeout=10)  # admitted, or refused for want of room (the fuzz took some)
    assert answer["ok"] or "no GPU of this machine has room" in answer["error"], answer
