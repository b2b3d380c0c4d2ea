"""The node's pod watcher: one list, then watches resumed from the last resourceVersion (events
and bookmarks advance it); a relist only after 410 Gone; errors back off and resume."""

import threading

import pytest

from agent.podwatch import Gone, PodList, PodWatcher


def pod(uid, rv, name="p"):
    return {"metadata": {"uid": uid, "name": name, "namespace": "ns", "resourceVersion": rv}}


class FakeApi:
    """Scripted answers: each watch call pops the next script (a list of events, or an
    exception to raise after them)."""

    def __init__(self, items, rv, scripts):
        self.items, self.rv, self.scripts = items, rv, list(scripts)
        self.lists, self.watches = 0, []

    def list_pods(self, node):
        self.lists += 1
        return PodList(list(self.items), self.rv)

    def node_labels(self, node):
        return {"gpu": "h200"}

    def watch_pods(self, node, resource_version, timeout_s):
        assert node == "n1"
        self.watches.append(resource_version)
        script = self.scripts.pop(0) if self.scripts else []
        for ev in script:
            if isinstance(ev, Exception):
                raise ev
            yield ev


def test_first_round_lists_then_watches_from_the_list_version():
    api = FakeApi([pod("a", "5")], "10", [[{"type": "ADDED", "object": pod("b", "11")}]])
    w = PodWatcher(api, "n1")
    w.watch_once()
    assert api.lists == 1 and api.watches == ["10"]
    assert set(w.pods()) == {"a", "b"} and w.resource_version == "11"
    assert w.node_labels() == {"gpu": "h200"} and w.synced.is_set()


def test_bookmarks_and_events_advance_the_version_the_next_watch_resumes_from():
    api = FakeApi([], "10", [
        [{"type": "ADDED", "object": pod("a", "12")},
         {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "40"}}}],
        [{"type": "MODIFIED", "object": pod("a", "41", name="renamed")},
         {"type": "DELETED", "object": pod("a", "42")}],
    ])
    w = PodWatcher(api, "n1")
    w.watch_once()
    assert w.resource_version == "40"
    w.watch_once()  # the server closed the first watch: resume, no list
    assert api.lists == 1 and api.watches == ["10", "40"]
    assert w.pods() == {} and w.resource_version == "42"


def test_a_disconnect_resumes_from_the_last_version_without_a_relist():
    api = FakeApi([], "7", [[{"type": "ADDED", "object": pod("a", "8")},
                             ConnectionResetError("peer reset")],
                            []])
    logs = []
    w = PodWatcher(api, "n1", log=logs.append)
    w.BACKOFF_MIN = 0.0
    done = threading.Event()
    original = api.watch_pods

    def watch(node, rv, timeout_s):
        if len(api.watches) >= 1:  # the second watch is the last
            w.stop()
            done.set()
        yield from original(node, rv, timeout_s)

    api.watch_pods = watch
    w.run()
    assert done.is_set()
    assert api.lists == 1 and api.watches == ["7", "8"]
    assert logs[0]["event"] == "pod_watch_error" and "peer reset" in logs[0]["error"]


def test_gone_drops_the_version_and_the_next_round_lists_again():
    api = FakeApi([pod("a", "3")], "9", [
        [{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
        [],
    ])
    logs = []
    w = PodWatcher(api, "n1", log=logs.append)
    with pytest.raises(Gone):
        w.watch_once()
    api.items, api.rv = [pod("b", "50")], "50"
    w.resource_version = ""  # what run() does on Gone
    w.watch_once()
    assert api.lists == 2 and set(w.pods()) == {"b"} and api.watches == ["9", "50"]


def test_run_relists_after_gone_and_logs_why():
    api = FakeApi([], "1", [[{"type": "ERROR", "object": {"code": 410, "message": "gone"}}],
                            []])
    logs = []
    w = PodWatcher(api, "n1", log=logs.append)
    original = api.watch_pods

    def watch(node, rv, timeout_s):
        if len(api.watches) >= 1:  # the second watch is the last
            w.stop()
        yield from original(node, rv, timeout_s)

    api.watch_pods = watch
    w.run()
    assert api.lists == 2
    assert logs == [{"event": "pod_watch_relist", "resource_version": "1",
                     "why": "410 Gone: gone"}]


def test_other_watch_errors_are_raised_with_their_code():
    w = PodWatcher(FakeApi([], "1", []), "n1")
    with pytest.raises(RuntimeError, match="watch error 500"):
        w.apply({"type": "ERROR", "object": {"code": 500, "message": "boom"}})


def test_change_callback_fires_for_pod_events_not_bookmarks():
    calls = []
    api = FakeApi([], "1", [[{"type": "BOOKMARK", "object": {"metadata": {
        "resourceVersion": "2"}}}, {"type": "ADDED", "object": pod("a", "3")}]])
    w = PodWatcher(api, "n1", on_change=lambda: calls.append(1))
    w.watch_once()
    assert len(calls) == 2  # the list, then the pod
