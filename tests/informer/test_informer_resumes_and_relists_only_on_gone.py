"""The shared informer (the agent's pods and Node, the extender's nodes and pods): one list,
then watches resumed from the last resourceVersion (events and bookmarks advance it); a relist
only after 410 Gone; errors back off and resume."""

import threading

import pytest

from gpuwarden.informer import Gone, Informer, Listed


def pod(uid, rv, name=None):
    return {"metadata": {"uid": uid, "name": name or f"p-{uid}", "namespace": "ns",
                         "resourceVersion": rv}}


class FakeApi:
    """Scripted answers: each watch call pops the next script (a list of events, or an
    exception to raise after them)."""

    def __init__(self, items, rv, scripts):
        self.items, self.rv, self.scripts = items, rv, list(scripts)
        self.lists, self.watches = 0, []

    def list(self):
        self.lists += 1
        return Listed(list(self.items), self.rv)

    def watch(self, resource_version, timeout_s):
        self.watches.append(resource_version)
        script = self.scripts.pop(0) if self.scripts else []
        for ev in script:
            if isinstance(ev, Exception):
                raise ev
            yield ev


def test_first_round_lists_then_watches_from_the_list_version():
    api = FakeApi([pod("a", "5")], "10", [[{"type": "ADDED", "object": pod("b", "11")}]])
    w = Informer("pods", api)
    w.watch_once()
    assert api.lists == 1 and api.watches == ["10"]
    assert set(w.keys()) == {"ns/p-a", "ns/p-b"} and w.resource_version == "11"
    assert w.synced.is_set()


def test_bookmarks_and_events_advance_the_version_the_next_watch_resumes_from():
    api = FakeApi([], "10", [
        [{"type": "ADDED", "object": pod("a", "12")},
         {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "40"}}}],
        [{"type": "MODIFIED", "object": pod("a", "41")},
         {"type": "DELETED", "object": pod("a", "42")}],
    ])
    w = Informer("pods", api)
    w.watch_once()
    assert w.resource_version == "40"
    w.watch_once()  # the server closed the first watch: resume, no list
    assert api.lists == 1 and api.watches == ["10", "40"]
    assert w.items() == [] and w.resource_version == "42"


def test_a_disconnect_resumes_from_the_last_version_without_a_relist():
    api = FakeApi([], "7", [[{"type": "ADDED", "object": pod("a", "8")},
                             ConnectionResetError("peer reset")],
                            []])
    logs = []
    w = Informer("pods", api, log=logs.append)
    w.BACKOFF_MIN = 0.0
    done = threading.Event()
    original = api.watch

    def watch(rv, timeout_s):
        if len(api.watches) >= 1:  # the second watch is the last
            w.stop()
            done.set()
        yield from original(rv, timeout_s)

    api.watch = watch
    w.run()
    assert done.is_set()
    assert api.lists == 1 and api.watches == ["7", "8"]
    assert logs[0]["event"] == "watch_error" and "peer reset" in logs[0]["error"]


def test_gone_drops_the_version_and_the_next_round_lists_again():
    api = FakeApi([pod("a", "3")], "9", [
        [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
        [],
    ])
    logs = []
    w = Informer("pods", api, log=logs.append)
    with pytest.raises(Gone):
        w.watch_once()
    api.items, api.rv = [pod("b", "50")], "50"
    w.resource_version = ""  # what run() does on Gone
    w.watch_once()
    assert api.lists == 2 and set(w.keys()) == {"ns/p-b"} and api.watches == ["9", "50"]


def test_run_relists_after_gone_and_logs_why():
    api = FakeApi([], "1", [[{"type": "ERROR", "object": {"code": 410, "message": "gone"}}],
                            []])
    logs = []
    w = Informer("pods", api, log=logs.append)
    original = api.watch

    def watch(rv, timeout_s):
        if len(api.watches) >= 1:  # the second watch is the last
            w.stop()
        yield from original(rv, timeout_s)

    api.watch = watch
    w.run()
    assert api.lists == 2
    assert logs == [{"event": "watch_relist", "kind": "pods", "resource_version": "1",
                     "why": "410 Gone: gone"}]


def test_other_watch_errors_are_raised_with_their_code():
    w = Informer("pods", FakeApi([], "1", []))
    with pytest.raises(RuntimeError, match="pods watch error 500"):
        w.apply({"type": "ERROR", "object": {"code": 500, "message": "boom"}})


def test_change_callback_fires_for_pod_events_not_bookmarks():
    calls = []
    api = FakeApi([], "1", [[{"type": "BOOKMARK", "object": {"metadata": {
        "resourceVersion": "2"}}}, {"type": "ADDED", "object": pod("a", "3")}]])
    w = Informer("pods", api, on_event=lambda t, o, n: calls.append(t))
    w.watch_once()
    assert calls == ["ADDED"]  # the bookmark moved the version only
