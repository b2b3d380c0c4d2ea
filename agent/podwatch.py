"""The pods of one node, kept current by one list and then a watch, as client-go's informers do:
the watch resumes from the last resourceVersion seen (events and bookmarks both advance it) after
a disconnect or a timeout, and the node's pods are listed again only when the API server answers
410 Gone (that version is too old). Errors back off (0.5 s doubling to 30 s).

The API is a small injected interface (`PodApi`), so tests feed events; `agent.kubeapi` is the
real one. The watcher runs on its own thread; readers take `pods()` (a copy) and are told of
changes through `on_change`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Gone", "PodApi", "PodList", "PodWatcher"]


class Gone(Exception):
    """The resourceVersion asked for is too old (HTTP 410 or a watch ERROR event of code 410)."""


@dataclass(frozen=True)
class PodList:
    items: list[dict[str, Any]]
    resource_version: str


class PodApi(Protocol):
    def list_pods(self, node: str) -> PodList: ...

    def watch_pods(self, node: str, resource_version: str,
                   timeout_s: int) -> Iterable[Mapping[str, Any]]:
        """Watch events ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}),
        bookmarks asked for; raises Gone for 410; ends when the server closes the watch."""
        ...

    def node_labels(self, node: str) -> dict[str, str]: ...


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class PodWatcher:
    WATCH_TIMEOUT_S = 300
    BACKOFF_MIN, BACKOFF_MAX = 0.5, 30.0

    def __init__(self, api: PodApi, node: str, on_change: Callable[[], None] = lambda: None,
                 log: Callable[[dict[str, Any]], None] = lambda ev: None) -> None:
        self.api = api
        self.node = node
        self.on_change = on_change
        self.log = log
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.resource_version = ""
        self.lists_total = 0
        self.watches_total = 0
        self.errors_total = 0
        self._pods: dict[str, dict[str, Any]] = {}
        self._node_labels: dict[str, str] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- what readers see -------------------------------------------------------------------

    def pods(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._pods)

    def node_labels(self) -> dict[str, str]:
        with self._lock:
            return dict(self._node_labels)

    # ---- one step at a time (tests drive these) ---------------------------------------------

    def relist(self) -> None:
        labels = self.api.node_labels(self.node)
        listed = self.api.list_pods(self.node)
        with self._lock:
            self._node_labels = dict(labels)
            self._pods = {_uid(p): p for p in listed.items if _uid(p)}
            self.resource_version = listed.resource_version
        self.lists_total += 1
        self.synced.set()
        self.on_change()

    def apply(self, event: Mapping[str, Any]) -> bool:
        """One watch event; True when the pods changed. Raises Gone for an ERROR of code 410."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(str(obj.get("message", "resourceVersion too old")))
            raise RuntimeError(f"watch error {code}: {obj.get('message', obj)}")
        rv = _rv(obj)
        with self._lock:
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK":
                return False
            uid = _uid(obj)
            if not uid:
                return False
            if kind == "DELETED":
                return self._pods.pop(uid, None) is not None
            if kind in ("ADDED", "MODIFIED"):
                self._pods[uid] = dict(obj)
                return True
        return False

    def watch_once(self) -> None:
        """List when there is no resourceVersion, then watch until the server ends the watch."""
        if not self.resource_version:
            self.relist()
        self.watches_total += 1
        for ev in self.api.watch_pods(self.node, self.resource_version, self.WATCH_TIMEOUT_S):
            if self.apply(ev):
                self.on_change()
            if self.stopping.is_set():
                return

    # ---- the thread -------------------------------------------------------------------------

    def run(self) -> None:
        backoff = self.BACKOFF_MIN
        while not self.stopping.is_set():
            try:
                self.watch_once()
                backoff = self.BACKOFF_MIN
            except Gone as err:
                self.log({"event": "pod_watch_relist", "resource_version":
                          self.resource_version, "why": f"410 Gone: {err}"})
                self.resource_version = ""  # the next round lists again
            except Exception as err:  # API down, connection reset: resume from the version
                self.errors_total += 1
                self.log({"event": "pod_watch_error", "error": f"{type(err).__name__}: {err}",
                          "retry_in_s": backoff})
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, self.BACKOFF_MAX)

    def start(self) -> PodWatcher:
        self._thread = threading.Thread(target=self.run, name="pod-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
