"""A local cache of one kind of Kubernetes object, kept current as client-go's informers do: one
list, then one watch that resumes from the last resourceVersion seen (events and bookmarks both
advance it) after a disconnect or timeout; the kind is listed again only when the API server
answers 410 Gone. Errors back off (0.5 s doubling to 30 s).

The API is a small injected interface (`ListWatch`), so tests feed events; `ClientListWatch`
is the real one over a list function of the `kubernetes` client (the extender watches Nodes and
Pods with it, the cluster-mode agent its own Node and the Pods bound to it). Readers use `get` /
`items` (no API call); `on_event(type, old, new)` tells a subscriber of each change after the
cache has it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ClientListWatch", "Gone", "Informer", "ListWatch", "Listed", "object_key"]

Obj = dict[str, Any]
Handler = Callable[[str, Obj | None, Obj | None], None]


class Gone(Exception):
    """The resourceVersion asked for is too old (HTTP 410 or a watch ERROR event of code 410)."""


@dataclass(frozen=True)
class Listed:
    items: list[Obj]
    resource_version: str


class ListWatch(Protocol):
    def list(self) -> Listed: ...

    def watch(self, resource_version: str, timeout_s: int) -> Iterable[Mapping[str, Any]]:
        """Watch events ({"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": {...}}) with
        bookmarks; raises Gone for 410; ends when the server closes the watch."""
        ...


class ClientListWatch:
    """List and watch one kind through a kubernetes-client list function, as dicts (raw JSON,
    no model classes). Bind selectors with functools.partial, e.g.
    `partial(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=n1")`.
    `error` turns the client's ApiException into the caller's error type."""

    def __init__(self, list_fn: Any, error: Callable[[Any], Exception] | None = None) -> None:
        self.list_fn = list_fn
        self.error = error or (lambda err: RuntimeError(
            f"HTTP {getattr(err, 'status', '?')} {getattr(err, 'reason', err)}"))

    def list(self) -> Listed:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.list_fn(_preload_content=False, resource_version="0")
        except ApiException as err:
            raise self.error(err) from None
        doc = json.loads(resp.data)
        return Listed(list(doc.get("items") or []),
                      str((doc.get("metadata") or {}).get("resourceVersion") or ""))

    def watch(self, resource_version: str, timeout_s: int) -> Iterator[Mapping[str, Any]]:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.list_fn(watch=True, resource_version=resource_version,
                                allow_watch_bookmarks=True, timeout_seconds=timeout_s,
                                _preload_content=False, _request_timeout=timeout_s + 30)
        except ApiException as err:
            if err.status == 410:
                raise Gone(str(err.reason)) from None
            raise self.error(err) from None
        try:
            buf = b""
            for chunk in resp.stream(65536):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def object_key(obj: Mapping[str, Any]) -> str:
    """namespace/name, or name for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    WATCH_TIMEOUT_S = 300
    BACKOFF_MIN, BACKOFF_MAX = 0.5, 30.0

    def __init__(self, name: str, api: ListWatch, on_event: Handler = lambda t, o, n: None,
                 log: Callable[[dict[str, Any]], None] = lambda ev: None,
                 transform: Callable[[Obj], Obj] | None = None) -> None:
        """`transform` keeps what readers need of each object (client-go's SetTransform): a
        cache of every pod of a cluster holds a few fields, not whole pods."""
        self.name = name
        self.api = api
        self.transform = transform
        self.on_event = on_event
        self.log = log
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.resource_version = ""
        self.lists_total = 0
        self.watches_total = 0
        self.errors_total = 0
        self._objects: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # ---- what readers see -------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def items(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._objects)

    # ---- one step at a time (tests drive these) ---------------------------------------------

    def relist(self) -> None:
        listed = self.api.list()
        items = listed.items if self.transform is None else [self.transform(o)
                                                              for o in listed.items]
        fresh = {object_key(o): o for o in items}
        with self._lock:
            old = self._objects
            self._objects = fresh
            self.resource_version = listed.resource_version
        self.lists_total += 1
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self.on_event("ADDED", None, obj)
            elif _rv(before) != _rv(obj):
                self.on_event("MODIFIED", before, obj)
        for key, obj in old.items():
            if key not in fresh:
                self.on_event("DELETED", obj, None)
        self.synced.set()

    def apply(self, event: Mapping[str, Any]) -> None:
        """One watch event. Raises Gone for an ERROR of code 410."""
        kind = event.get("type")
        obj = dict(event.get("object") or {})
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(str(obj.get("message", "resourceVersion too old")))
            raise RuntimeError(f"{self.name} watch error {code}: {obj.get('message', obj)}")
        rv = _rv(obj)
        key = object_key(obj)
        if self.transform is not None and kind != "BOOKMARK":
            obj = self.transform(obj)
        with self._lock:
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK" or not key:
                return
            old = self._objects.get(key)
            if kind == "DELETED":
                old = self._objects.pop(key, None) or obj
            elif kind in ("ADDED", "MODIFIED"):
                self._objects[key] = obj
            else:
                return
        self.on_event(str(kind), old, None if kind == "DELETED" else obj)

    def watch_once(self) -> None:
        """List when there is no resourceVersion, then watch until the server ends the watch."""
        if not self.resource_version:
            self.relist()
        self.watches_total += 1
        for ev in self.api.watch(self.resource_version, self.WATCH_TIMEOUT_S):
            self.apply(ev)
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
                self.log({"event": "watch_relist", "kind": self.name,
                          "resource_version": self.resource_version, "why": f"410 Gone: {err}"})
                self.resource_version = ""  # the next round lists again
            except Exception as err:  # API down, connection reset: resume from the version
                self.errors_total += 1
                self.log({"event": "watch_error", "kind": self.name,
                          "error": f"{type(err).__name__}: {err}", "retry_in_s": backoff})
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, self.BACKOFF_MAX)

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self.run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, wait_s: float = 0.0) -> None:
        """Ask the thread to end, and wait up to `wait_s` for it: one waiting to retry ends at
        once, one inside a watch when the server answers or closes it.  A daemon thread still
        running when the interpreter exits can abort it (seen: a test process that left an
        informer retrying against a stopped API server died with SIGABRT after its tests
        passed), so whoever ends the process waits."""
        stop_all([self], wait_s)

    def join(self, timeout_s: float) -> None:
        t = self._thread
        if timeout_s > 0 and t is not None and t is not threading.current_thread():
            t.join(timeout_s)


def stop_all(informers: Iterable[Informer], wait_s: float = 1.0) -> None:
    """Ask every informer to end at once, then wait for their threads up to `wait_s` in all
    (Informer.stop says why whoever ends a process waits)."""
    informers = list(informers)
    for inf in informers:
        inf.stopping.set()
    deadline = time.monotonic() + wait_s
    for inf in informers:
        inf.join(deadline - time.monotonic())
