"""The agent's one edge to the Kubernetes API (the `kubernetes` client): list/watch sources for
the pods of its node and for its Node (raw JSON, the shape of a manifest; gpuwarden.informer
keeps them), and Events on pods, posted from a background thread so that the loop never waits on
the API server.

Permissions it needs (deploy/ grants them): pods list/watch, nodes list/watch, events create.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from gpuwarden.informer import ClientListWatch

__all__ = ["EventWriter", "KubeApi"]


class KubeApi:
    """The cluster-mode agent's API calls over the kubernetes client."""

    def __init__(self, client: Any) -> None:
        from kubernetes import client as k

        self.core: Any = k.CoreV1Api(client)  # raw JSON calls (_preload_content=False)

    def pods_of_node(self, node: str) -> ClientListWatch:
        """List/watch of the pods bound to `node` (field selector spec.nodeName)."""
        return ClientListWatch(partial(self.core.list_pod_for_all_namespaces,
                                       field_selector=f"spec.nodeName={node}"), _api_error)

    def node(self, node: str) -> ClientListWatch:
        """List/watch of the one Node `node` (its labels are matched by the policy)."""
        return ClientListWatch(partial(self.core.list_node,
                                       field_selector=f"metadata.name={node}"), _api_error)

    def create_event(self, body: Mapping[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        ns = str((body.get("metadata") or {}).get("namespace") or "default")
        try:
            self.core.create_namespaced_event(ns, dict(body), _preload_content=False)
        except ApiException as err:
            raise _api_error(err, f"create an Event in namespace {ns}") from None


def _api_error(err: Any, what: str = "call the API server") -> RuntimeError:
    body = ""
    try:
        body = json.loads(err.body).get("message", "")
    except (TypeError, ValueError, AttributeError):
        body = str(err.body or "")[:200]
    return RuntimeError(f"cannot {what}: HTTP {err.status} {err.reason}: {body}")


class EventWriter:
    """Posts Event bodies in order on its own thread; a full queue drops (and counts) events
    rather than slowing the agent's loop."""

    def __init__(self, post: Callable[[Mapping[str, Any]], None],
                 log: Callable[[dict[str, Any]], None] = lambda ev: None,
                 size: int = 1000) -> None:
        self._post = post
        self._log = log
        self._q: queue.Queue[Mapping[str, Any] | None] = queue.Queue(size)
        self.posted_total = 0
        self.dropped_total = 0
        self.failed_total = 0
        self._thread = threading.Thread(target=self._run, name="pod-events", daemon=True)
        self._thread.start()

    def put(self, body: Mapping[str, Any]) -> None:
        try:
            self._q.put_nowait(body)
        except queue.Full:
            self.dropped_total += 1

    def _run(self) -> None:
        while True:
            body = self._q.get()
            if body is None:
                return
            try:
                self._post(body)
                self.posted_total += 1
            except Exception as err:
                self.failed_total += 1
                self._log({"event": "pod_event_error", "error": str(err),
                           "reason": body.get("reason")})
            finally:
                self._q.task_done()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event was posted (or failed); False on timeout."""
        done = threading.Event()

        def waiter() -> None:
            self._q.join()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        return done.wait(timeout)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=5.0)
