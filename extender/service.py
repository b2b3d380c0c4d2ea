"""The scheduler extender's verbs over a watched cluster: filter, prioritize and bind.

State comes from two informers (Nodes, Pods): each Node's GPUs (`gpuwarden.io/node-gpus`, or
HAMi's register) and its allocation ledger (`gpuwarden.io/allocations`) are decoded once per
change into a `NodeView`; the verbs read the views and never list the cluster.

Bind is reserve -> write -> bind -> undo on failure. The reservation is an update of the Node's
ledger guarded by the Node's resourceVersion (HTTP 409 when another replica or the device plugin
wrote first: re-read, re-fit, retry), so two extender replicas can never hand out the same
slice; there is no lock to expire. A failed write or binding releases the reservation at once.
A pod that is deleted or finishes is released from its node's ledger by the pod watch (seconds),
which updates the Node, which is a cluster event that makes kube-scheduler retry pending pods.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from extender.kube import ApiError, ClusterApi, Conflict
from extender.metrics import Metrics
from gpuwarden.annotations import (
    ALLOCATIONS,
    ASSIGNMENT,
    BIND_PHASE,
    HAMI_BIND_PHASE,
    AnnotationError,
    NodeAllocations,
    NodeInventory,
    assignment_annotations,
    decode_allocations,
    encode_allocations,
    node_inventory,
)
from gpuwarden.config import Settings
from gpuwarden.informer import Informer, object_key, stop_all
from gpuwarden.placement import (
    MAX_SCORE,
    ContainerRequest,
    Denial,
    Fit,
    Misfit,
    NodeState,
    PlacementError,
    PodPlanner,
    Selectors,
    Summary,
    fit,
    fits_one,
    fullness,
    ledger_usage,
    node_key,
    node_summary,
    policy_node_keys,
    quick_fits,
    reservation,
)
from policy.compiler import CompiledPolicy
from policy.pods import PodError, workloads_from_manifest

__all__ = ["Extender", "NodeView"]

TERMINAL = ("Succeeded", "Failed")
RETRY = "gpuwarden.io/retry"  # touched on waiting pods when capacity frees (Extender.nudge)
# Misfits that preemption cannot cure: kube-scheduler does not try to evict pods for them.
UNRESOLVABLE = frozenset({"no_gpus", "gpu_count", "selector", "denied", "unhealthy"})
BIND_ATTEMPTS = 16
ORPHAN_GRACE_S = 60.0  # a reservation whose pod is unknown this long is released


@dataclass(frozen=True)
class NodeView:
    """A Node as placement reads it, decoded once per resourceVersion."""

    name: str
    rv: str
    labels: Mapping[str, str]
    state: NodeState | None  # None: no GPUs registered, or an annotation is unreadable
    allocations: NodeAllocations
    problem: str = ""  # why state is None
    summary: Summary = ()  # placement.node_summary: the filter's fast path
    scores: tuple[int, int] = (0, 0)  # prioritize's score under binpack, under spread
    policy_key: tuple[str, tuple[tuple[str, str], ...]] = ("", ())  # placement.node_key

    @classmethod
    def of(cls, node: Mapping[str, Any], keys: tuple[bool, Sequence[str]] = (False, ()),
           summaries: dict[Summary, Summary] | None = None) -> NodeView:
        """`keys`: (policy reads node names, the node labels it reads, sorted); `summaries`
        interns equal summaries, so the filter decides once for many nodes alike."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        annotations = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        key = node_key(keys[0], keys[1], name, labels)
        rv = str(meta.get("resourceVersion", ""))
        try:
            allocations = (decode_allocations(annotations[ALLOCATIONS])
                           if ALLOCATIONS in annotations else NodeAllocations())
            inventory = node_inventory(annotations)
        except AnnotationError as err:
            return cls(name, rv, labels, None, NodeAllocations(),
                       f"gpuwarden: node {name}: {err}", policy_key=key)
        if inventory is None:
            return cls(name, rv, labels, None, allocations,
                       "gpuwarden: the node has no GPUs registered (no gpuwarden.io/node-gpus "
                       "annotation from the device plugin)", policy_key=key)
        return cls.placed(name, rv, labels, inventory, allocations, key, summaries)

    @classmethod
    def placed(cls, name: str, rv: str, labels: Mapping[str, str], inventory: NodeInventory,
               allocations: NodeAllocations, key: tuple[str, tuple[tuple[str, str], ...]],
               summaries: dict[Summary, Summary] | None = None) -> NodeView:
        state = NodeState(name, inventory, ledger_usage(allocations))
        full = fullness(state)
        summary = node_summary(state)
        if summaries is not None:
            if len(summaries) > 100_000:
                summaries.clear()
            summary = summaries.setdefault(summary, summary)
        return cls(name, rv, labels, state, allocations, summary=summary,
                   scores=(round(full * MAX_SCORE), round((1.0 - full) * MAX_SCORE)),
                   policy_key=key)

    def without(self, uid: str, summaries: dict[Summary, Summary] | None = None) -> NodeView:
        """This view as if the pod's reservation were already released (same resourceVersion:
        the watch's next version replaces it)."""
        if self.state is None:
            return self
        return NodeView.placed(self.name, self.rv, self.labels, self.state.inventory,
                               self.allocations.without(uid), self.policy_key, summaries)


def _newer(rv: str, than: str) -> bool:
    try:
        return int(rv) >= int(than)
    except ValueError:
        return True


@dataclass
class _PodPlan:
    planner: PodPlanner
    fits: dict[tuple[str, str], Fit | Misfit] = field(default_factory=dict)


class Extender:
    def __init__(self, api: ClusterApi, policy: CompiledPolicy, settings: Settings,
                 metrics: Metrics | None = None, clock: Callable[[], float] = time.time,
                 log: Callable[[dict[str, Any]], None] = lambda ev: None) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.log = log
        self.views: dict[str, NodeView] = {}
        self._views_lock = threading.Lock()
        self._plans: OrderedDict[tuple[str, str], _PodPlan] = OrderedDict()
        self._plans_lock = threading.Lock()
        self._summaries: dict[Summary, Summary] = {}
        self._locks_lock = threading.Lock()
        self._pod_locks: dict[str, threading.Lock] = {}
        self._node_locks: dict[str, threading.Lock] = {}
        self.set_policy(policy)
        self._releases: queue.Queue[tuple[str, str, str] | None] = queue.Queue()
        self.nodes = Informer("nodes", api.node_watch(), self._on_node, log)
        self.pods = Informer("pods", api.pod_watch(), self._on_pod, log, transform=_slim_pod)
        self.metrics.bind_views(lambda: list(self.views.values()))
        self._stop = threading.Event()

    def set_policy(self, policy: CompiledPolicy) -> None:
        self.policy = policy
        self.node_keys = policy_node_keys(policy)
        self._view_keys = (self.node_keys[0], tuple(sorted(self.node_keys[1])))
        with self._plans_lock:
            self._plans.clear()
        with self._views_lock:
            for name, view in list(self.views.items()):
                self.views[name] = replace(view, policy_key=node_key(
                    self._view_keys[0], self._view_keys[1], name, view.labels))

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Extender:
        self.nodes.start()
        self.pods.start()
        threading.Thread(target=self._release_loop, name="release", daemon=True).start()
        threading.Thread(target=self._orphan_loop, name="orphans", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        stop_all((self.nodes, self.pods), wait_s=1.0)
        self._releases.put(None)

    @property
    def ready(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    # ---- watch events ----------------------------------------------------------------------

    def _store(self, node: Mapping[str, Any]) -> NodeView:
        view = NodeView.of(node, self._view_keys, self._summaries)
        with self._views_lock:
            old = self.views.get(view.name)
            if old is None or _newer(view.rv, old.rv):
                self.views[view.name] = view
                return view
            return old

    def _on_node(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None,
                 ) -> None:
        if new is not None:
            self._store(new)
        elif old is not None:
            with self._views_lock:
                self.views.pop(str((old.get("metadata") or {}).get("name", "")), None)

    def _on_pod(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None,
                ) -> None:
        pod = new or old or {}
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if new is not None and (new.get("status") or {}).get("phase") not in TERMINAL:
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        view = self.views.get(node)
        if view is not None and view.allocations.get(uid) is not None:
            # kube-scheduler retries waiting pods on this very deletion, often before the
            # release below reaches the API server: filter must already count the slice free
            # (bind reads the node afresh, so nothing is handed out twice)
            with self._views_lock:
                if self.views.get(node) is view:
                    self.views[node] = view.without(uid, self._summaries)
            self._releases.put((node, uid, "the pod " + ("was deleted" if new is None
                                                         else "finished")))

    def _release_loop(self) -> None:
        while True:
            item = self._releases.get()
            if item is None:
                return
            node, uid, why = item
            try:
                if self.release(node, uid, why):
                    self.nudge()
            except Exception as err:  # the orphan sweep retries
                self.log({"event": "release_error", "node": node, "uid": uid,
                          "error": str(err)})

    def _orphan_loop(self) -> None:
        while not self._stop.wait(15.0):
            with contextlib.suppress(Exception):
                self.release_orphans()

    def release_orphans(self) -> int:
        """Release reservations whose pod is gone or finished (its events missed, or the
        reserving replica died between reserve and bind). Needs the pod cache synced."""
        if not self.pods.synced.is_set():
            return 0
        now = self.clock()
        live = {str((p.get("metadata") or {}).get("uid", "")) for p in self.pods.items()
                if (p.get("status") or {}).get("phase") not in TERMINAL}
        done = 0
        for view in list(self.views.values()):
            for r in view.allocations.reservations:
                if r.uid not in live and now - r.at > ORPHAN_GRACE_S:
                    self.release(view.name, r.uid, "no such pod is running")
                    done += 1
        return done

    NUDGE_MAX = 100

    def nudge(self) -> int:
        """Touch the pods waiting for gpuwarden's scheduler after capacity freed: kube-scheduler
        may keep a pod that only the extender refused among its unschedulable pods for minutes
        (no plugin of its own asks to retry it), and an update of the pod brings it back."""
        waiting = [p for p in self.pods.items()
                   if not (p.get("spec") or {}).get("nodeName")
                   and (p.get("spec") or {}).get("schedulerName") == self.settings.scheduler_name
                   and (p.get("status") or {}).get("phase") in (None, "Pending")]
        stamp = str(int(self.clock() * 1000))
        done = 0
        for p in waiting[:self.NUDGE_MAX]:
            meta = p.get("metadata") or {}
            with contextlib.suppress(ApiError):
                self.api.patch_pod_annotations(str(meta.get("namespace", "")),
                                               str(meta.get("name", "")), {RETRY: stamp})
                done += 1
        if done:
            self.metrics.nudges.inc(done)
        return done

    def release(self, node: str, uid: str, why: str) -> bool:
        """Remove the pod's reservation from the node's ledger (guarded, retried on 409)."""
        for _ in range(BIND_ATTEMPTS):
            view = self._store(self.api.read_node(node))
            if view.allocations.get(uid) is None:
                return False
            try:
                self._store(self.api.patch_node_annotations(
                    node, {ALLOCATIONS: encode_allocations(view.allocations.without(uid))},
                    view.rv))
            except Conflict:
                self.metrics.conflicts.inc()
                continue
            self.log({"event": "released", "node": node, "uid": uid, "why": why})
            self.metrics.releases.inc()
            return True
        raise ApiError(409, f"node {node}: the ledger kept changing; release of {uid} retried "
                            f"{BIND_ATTEMPTS} times")

    # ---- the pod's plan ----------------------------------------------------------------------

    def _plan(self, pod: Mapping[str, Any]) -> _PodPlan:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        with self._plans_lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                return plan
        where = f"pod {object_key(pod)}"
        workloads = workloads_from_manifest(pod, where, self.settings.resource_names,
                                            gpu_only=True)
        planner = PodPlanner(workloads, self.policy, meta.get("annotations") or {},
                             node_policy=self.settings.node_scheduler_policy,
                             gpu_policy=self.settings.gpu_scheduler_policy,
                             node_keys=self.node_keys)
        plan = _PodPlan(planner)
        with self._plans_lock:
            self._plans[key] = plan
            while len(self._plans) > 2048:
                self._plans.popitem(last=False)
        return plan

    def _fit(self, plan: _PodPlan, name: str) -> Fit | Misfit:
        view = self.views.get(name)
        if view is None:
            return Misfit(name, f"gpuwarden: node {name} is not known to the extender (yet)",
                          ("no_gpus",))
        key = (name, view.rv)
        hit = plan.fits.get(key)
        if hit is not None:
            return hit
        if view.state is None:
            result: Fit | Misfit = Misfit(name, view.problem, ("no_gpus",))
        else:
            request = plan.planner.request_for(view.policy_key)
            result = (Misfit(name, f"gpuwarden: {request.message}", ("denied",))
                      if isinstance(request, Denial) else fit(view.state, request))
        if len(plan.fits) > 4096:
            plan.fits.clear()
        plan.fits[key] = result
        return result

    def capacity(self, planner: PodPlanner) -> str | None:
        """For the webhook: None when some GPU node could hold the pod if it were empty (or
        no GPU node is known yet), else why none can."""
        reasons: list[str] = []
        for view in list(self.views.values()):
            if view.state is None:
                continue
            request = planner.request(view.name, view.labels)
            if isinstance(request, Denial):
                reasons.append(f"{view.name}: {request.message}")
                continue
            r = fit(NodeState(view.name, view.state.inventory, {}), request)
            if isinstance(r, Fit):
                return None
            reasons.append(f"{view.name}: {r.reason.removeprefix('gpuwarden: ')}")
        if not reasons:
            return None
        more = f" (and {len(reasons) - 3} more nodes)" if len(reasons) > 3 else ""
        return "; ".join(sorted(reasons)[:3]) + more

    # ---- the verbs (ExtenderArgs in, ExtenderFilterResult / HostPriorityList out) -----------

    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        pod = args.get("Pod") or {}
        names, nodes = _node_names(args)
        try:
            plan = self._plan(pod)
        except (PodError, PlacementError) as err:
            return {"NodeNames": None, "FailedNodes": {}, "Error": str(err)}
        if not plan.planner.wants_gpu:
            return _filter_result(names, nodes, set(names), {}, {})
        ok: set[str] = set()
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        views = self.views
        planner = plan.planner
        # the fast path: one decision per (node state, request) for one-container pods
        Quick = tuple[ContainerRequest, dict[int, int], Selectors | None]
        simple: dict[int, Quick | None] = {}
        decided: dict[tuple[int, int], bool] = {}
        for name in names:
            view = views.get(name)
            if view is not None and view.state is not None:
                request = planner.request_for(view.policy_key)
                if not isinstance(request, Denial):
                    rid = id(request)
                    if rid not in simple:
                        sel = request.selectors
                        simple[rid] = ((request.containers[0], {}, sel if sel.use_types
                                        or sel.nouse_types else None)
                                       if quick_fits((), request) is not None else None)
                    one = simple[rid]
                    if one is not None:
                        k = (id(view.summary), rid)
                        quick = decided.get(k)
                        if quick is None:
                            quick = decided[k] = fits_one(view.summary, *one)
                        if quick:
                            ok.add(name)
                            continue
            r = self._fit(plan, name)
            if isinstance(r, Fit):
                ok.add(name)
            else:
                (unresolvable if UNRESOLVABLE.issuperset(r.kinds) else failed)[name] = r.reason
                for kind in r.kinds:
                    self.metrics.rejections.labels(reason=kind).inc()
        self.metrics.filter_seconds.observe(time.perf_counter() - started)
        return _filter_result(names, nodes, ok, failed, unresolvable)

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        started = time.perf_counter()
        names, _ = _node_names(args)
        try:
            plan = self._plan(args.get("Pod") or {})
        except (PodError, PlacementError):
            return [{"Host": n, "Score": 0} for n in names]
        out = []
        which = 0 if plan.planner.node_policy == "binpack" else 1
        views = self.views
        gpu = plan.planner.wants_gpu
        for name in names:
            view = views.get(name)
            score = view.scores[which] if gpu and view is not None else 0
            out.append({"Host": name, "Score": score})
        self.metrics.prioritize_seconds.observe(time.perf_counter() - started)
        return out

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        ns, name = str(args.get("PodNamespace", "")), str(args.get("PodName", ""))
        uid, node = str(args.get("PodUID", "")), str(args.get("Node", ""))
        try:
            error = self._bind(ns, name, uid, node)
        except Exception as err:  # the API went away: say so, the scheduler retries
            error = f"gpuwarden: bind of {ns}/{name} to {node} failed: {err}"
        self.metrics.bind_seconds.observe(time.perf_counter() - started)
        self.metrics.binds.labels(result="error" if error else "ok").inc()
        if error:
            self.log({"event": "bind_failed", "pod": f"{ns}/{name}", "node": node,
                      "error": error})
        return {"Error": error}

    def _lock(self, table: dict[str, threading.Lock], key: str) -> threading.Lock:
        with self._locks_lock:
            lock = table.get(key)
            if lock is None:
                if len(table) > 50_000:
                    table.clear()  # only idle locks are dropped: holders keep their object
                lock = table[key] = threading.Lock()
            return lock

    def _bind(self, ns: str, name: str, uid: str, node: str) -> str:
        # One bind of a pod at a time: kube-scheduler calls again when a slow bind outlives its
        # httpTimeout, and the second call must see what the first did.
        with self._lock(self._pod_locks, uid):
            pod = self.api.read_pod(ns, name)
            meta = pod.get("metadata") or {}
            if uid and meta.get("uid") != uid:
                return f"gpuwarden: pod {ns}/{name} is not the pod {uid} the scheduler placed"
            bound_to = (pod.get("spec") or {}).get("nodeName")
            if bound_to:
                if bound_to == node and ASSIGNMENT in (meta.get("annotations") or {}):
                    return ""  # an earlier call of this bind went through
                return f"gpuwarden: pod {ns}/{name} is already bound to {bound_to}"
            plan = self._plan(pod)
            if not plan.planner.wants_gpu:
                self.api.bind(ns, name, uid, node)
                return ""
            # Binds to one node queue here rather than race into 409s; other replicas are
            # kept out by the resourceVersion precondition.
            with self._lock(self._node_locks, node):
                placed = self._reserve(plan, ns, name, uid, node)
            if isinstance(placed, str):
                return placed
            try:
                self.api.patch_pod_annotations(ns, name, assignment_annotations(
                    placed.assignment, "allocating", int(self.clock())))
                self.api.bind(ns, name, uid, node)
            except Exception as err:
                return self._undo(ns, name, uid, node, err)
            return ""

    def _reserve(self, plan: _PodPlan, ns: str, name: str, uid: str, node: str) -> Fit | str:
        """Write the pod's reservation into the node's ledger; the Fit, or why not."""
        view = self.views.get(node)  # our own last write is usually the newest
        for attempt in range(BIND_ATTEMPTS):
            if view is None or attempt > 0:
                view = self._store(self.api.read_node(node))
            if view.state is None:
                return view.problem
            mine = view.allocations.without(uid)  # a retried bind replaces its own
            state = NodeState(node, view.state.inventory, ledger_usage(mine))
            request = plan.planner.request_for(view.policy_key)
            if isinstance(request, Denial):
                return f"gpuwarden: {request.message}"
            r = fit(state, request)
            if isinstance(r, Misfit):
                if attempt == 0:
                    continue  # judged on the cache: read the node before refusing
                return r.reason
            ledger = mine.with_(reservation(uid, f"{ns}/{name}", int(self.clock()), r.footprint))
            try:
                self._store(self.api.patch_node_annotations(
                    node, {ALLOCATIONS: encode_allocations(ledger)}, view.rv))
            except Conflict:
                self.metrics.conflicts.inc()
                continue
            return r
        return (f"gpuwarden: node {node}'s ledger kept changing ({BIND_ATTEMPTS} conflicts); "
                "the scheduler will retry")

    def _undo(self, ns: str, name: str, uid: str, node: str, err: Exception) -> str:
        with contextlib.suppress(Exception):
            if (self.api.read_pod(ns, name).get("spec") or {}).get("nodeName") == node:
                return ""  # the binding went through; only its answer was lost
        undo = "its reservation was released"
        try:
            self.release(node, uid, f"bind failed: {err}")
        except Exception as err2:
            undo = f"releasing its reservation failed too ({err2}); the orphan sweep will"
        with contextlib.suppress(Exception):
            self.api.patch_pod_annotations(ns, name, {BIND_PHASE: "failed",
                                                      HAMI_BIND_PHASE: "failed",
                                                      ASSIGNMENT: None})
        return f"gpuwarden: bind of {ns}/{name} to {node} failed: {err}; {undo}"


def _slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What the extender keeps of each pod of the cluster: who it is, where, whether done."""
    meta = pod.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion")
                         if k in meta},
            "spec": {k: (pod.get("spec") or {}).get(k) for k in ("nodeName", "schedulerName")},
            "status": {"phase": (pod.get("status") or {}).get("phase")}}


def _node_names(args: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]] | None]:
    names = args.get("NodeNames")
    if names is not None:
        return [str(n) for n in names], None
    items = list((args.get("Nodes") or {}).get("items") or [])
    return [str((n.get("metadata") or {}).get("name", "")) for n in items], items


def _filter_result(names: Sequence[str], nodes: list[dict[str, Any]] | None, ok: set[str],
                   failed: dict[str, str], unresolvable: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable,
                           "Error": ""}
    if nodes is None:
        out["NodeNames"] = [n for n in names if n in ok]
    else:
        out["Nodes"] = {"items": [n for n in nodes
                                  if (n.get("metadata") or {}).get("name") in ok]}
    return out
