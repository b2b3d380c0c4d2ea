"""Telling the node agent about the containers the plugin set up, through the agent's control
socket (`adopt` when a container is set up, `release` when its pod is gone), so that the agent's
audit, verdicts and kills apply to pods as to standalone workloads.

The agent may be down or restarting: `AgentLink` keeps what it could not deliver and delivers it
on the next `flush()` (the plugin calls it from its maintenance loop). Nothing here blocks an
Allocate for long: one short connection per message.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deviceplugin.allocation import ContainerPlan

__all__ = ["AgentLink", "adopt_message"]


def adopt_message(plan: ContainerPlan, region_file: str) -> dict[str, Any]:
    mib = [d.memory_mib for d in plan.grants]
    return {
        "op": "adopt", "wid": plan.wid, "namespace": plan.pod.namespace,
        "pod": plan.pod.name, "pod_uid": plan.pod.uid, "container": plan.container,
        "labels": dict(plan.pod.labels), "region": region_file,
        "devices": [d.uuid for d in plan.grants], "limits_bytes": list(plan.limits_bytes),
        "request": {"gpu": len(plan.grants), "gpumem_mib": max(mib) or None,
                    "gpumem_percentage": None, "gpucores": plan.grants[0].cores,
                    "priority": plan.priority},
    }


class AgentLink:
    def __init__(self, socket_path: Path | None, timeout: float = 2.0) -> None:
        self.path = socket_path
        self.timeout = timeout
        self.pending: dict[str, dict[str, Any]] = {}  # wid -> message not yet delivered
        self.last_error = ""

    def _send(self, msg: Mapping[str, Any]) -> bool:
        if self.path is None:
            return True  # no agent on this node: nothing to tell
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(str(self.path))
                s.sendall(json.dumps(msg).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(1 << 16)
                    if not chunk:
                        break
                    data += chunk
            answer = json.loads(data)
        except (OSError, ValueError) as err:
            self.last_error = f"the agent at {self.path} is unreachable: {err}"
            return False
        if not answer.get("ok") and msg.get("op") == "adopt":
            self.last_error = f"the agent refused {msg.get('wid')}: {answer.get('error')}"
            return False
        self.last_error = ""
        return True

    def tell(self, msg: dict[str, Any]) -> bool:
        """Deliver now, or keep it for flush(); a later message about the same container (or
        pod) replaces it."""
        key = str(msg.get("wid") or msg.get("pod_uid"))
        self.pending.pop(key, None)
        if self._send(msg):
            return True
        self.pending[key] = msg
        return False

    def release(self, pod_uid: str) -> bool:
        """The pod is gone: the agent stops tracking its containers."""
        for key in [k for k, m in self.pending.items() if m.get("pod_uid") == pod_uid]:
            del self.pending[key]
        return self.tell({"op": "release", "pod_uid": pod_uid})

    def flush(self) -> int:
        """Deliver what is pending; returns how many are still pending."""
        for wid, msg in list(self.pending.items()):
            if not self._send(msg):
                break
            self.pending.pop(wid, None)
        return len(self.pending)
