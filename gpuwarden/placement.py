"""Where a pod's GPU containers go: fit, score and the choice of GPUs, as pure functions.

Shared by the scheduler extender (filter / prioritize / bind) and the standalone agent's
admission, so that both place by the same rules:

- a container asks for `count` distinct GPUs, each with a memory limit (MiB, or a percentage of
  the GPU, after the policy's defaults and caps), a share of compute (`cores`, 0 = no limit,
  100 = the GPU alone) and one of the GPU's `split_count` slices;
- a GPU fits when it is healthy, passes the pod's type / UUID selectors (HAMi's
  `nvidia.com/use-gputype`, `nouse-gputype`, `use-gpuuuid`, `nouse-gpuuuid`), and has the memory,
  cores and a slice left;
- init containers run one at a time before the app containers, so each is placed against what
  the node holds without the pod, and the pod's footprint on a GPU is the larger of its app
  containers' sum and each init container;
- binpack / spread choose among fitting GPUs (most / least used first) and score nodes;
- a node that cannot take the pod is explained: which container, which GPU, which resource and
  how short.

No I/O: the callers turn Kubernetes objects or NVML devices into `NodeState` and pods into
`PodRequest` (through the policy), and write the resulting `PodAssignment`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpuwarden.annotations import (
    HAMI_GPU_POLICY,
    HAMI_NODE_POLICY,
    NOUSE_GPUTYPE,
    NOUSE_GPUUUID,
    USE_GPUTYPE,
    USE_GPUUUID,
    ContainerAssignment,
    DeviceGrant,
    GpuDevice,
    NodeAllocations,
    NodeInventory,
    PodAssignment,
    Reservation,
)
from gpuwarden.config import POLICIES, SchedulerPolicy
from gpuwarden.limit import memory_limit
from gpuwarden.resources import NODE_LABEL_GPU_MEMORY
from policy import ast
from policy.compiler import CompiledPolicy
from policy.model import MIB, EffectiveRule
from policy.pods import PodWorkload

__all__ = [
    "SCHEDULER_POLICIES",
    "ContainerRequest",
    "Denial",
    "Fit",
    "Misfit",
    "NodeState",
    "PlacementError",
    "PodPlanner",
    "PodRequest",
    "SchedulerPolicy",
    "Selectors",
    "Usage",
    "choose",
    "denial_for",
    "fit",
    "fits_one",
    "fullness",
    "ledger_usage",
    "node_key",
    "node_summary",
    "node_usage",
    "pod_usage",
    "policy_node_keys",
    "quick_fits",
    "reservation",
]

SCHEDULER_POLICIES: tuple[str, ...] = POLICIES
MAX_SCORE = 10  # kube-scheduler's MaxExtenderPriority


class PlacementError(ValueError):
    """A pod annotation the placement reads is malformed; the message names it."""


@dataclass(frozen=True, slots=True)
class Usage:
    """What is allocated on one GPU: memory (MiB), cores (percent) and slices (containers)."""

    memory_mib: int = 0
    cores: int = 0
    slices: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.memory_mib + other.memory_mib, self.cores + other.cores,
                     self.slices + other.slices)

    def peak(self, other: Usage) -> Usage:
        """The larger of two footprints that never run at the same time."""
        return Usage(max(self.memory_mib, other.memory_mib), max(self.cores, other.cores),
                     max(self.slices, other.slices))

    def ratio(self, device: GpuDevice, split_count: int) -> float:
        """How full the GPU is, 0..1: the mean of its memory, cores and slices in use."""
        mem = self.memory_mib / device.memory_mib if device.memory_mib else 1.0
        cores = self.cores / device.cores if device.cores else 0.0
        return min(1.0, (mem + cores + self.slices / split_count) / 3)


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's ask, from the policy's effective rule for it."""

    name: str
    rule: EffectiveRule
    init: bool = False

    @property
    def count(self) -> int:
        return self.rule.gpu

    @property
    def cores(self) -> int:
        return self.rule.gpucores

    def memory_on(self, device: GpuDevice) -> int:
        """The container's memory limit (MiB) on this GPU: percentages and caps applied."""
        total = device.memory_mib * MIB
        return memory_limit(self.rule, total).within(total) // MIB

    def oversize(self, device: GpuDevice) -> bool:
        """Asks more MiB than the GPU has, with no cap that brings it down: never fits (the
        limit alone would be clamped to the GPU's size)."""
        r = self.rule
        return (r.gpumem_mib is not None and r.gpumem_mib > device.memory_mib
                and (r.gpumem_cap_mib is None or r.gpumem_cap_mib > device.memory_mib)
                and r.gpumem_cap_percentage is None)

    def describe(self) -> str:
        r = self.rule
        mem = (f"{r.gpumem_mib}MiB" if r.gpumem_mib is not None else
               f"{r.gpumem_percentage}% memory" if r.gpumem_percentage is not None else
               "the whole memory")
        gpus = "1 GPU" if r.gpu == 1 else f"{r.gpu} GPUs"
        cores = f", {r.gpucores}% cores" if r.gpucores else ""
        return f"container {self.name} needs {gpus} with {mem}{cores}"


@dataclass(frozen=True, slots=True)
class Selectors:
    """The pod's GPU type / UUID include and exclude lists (HAMi's annotations)."""

    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> Selectors:
        def items(key: str, lower: bool) -> tuple[str, ...]:
            raw = annotations.get(key, "")
            return tuple(s.strip().lower() if lower else s.strip()
                         for s in raw.split(",") if s.strip())

        return cls(items(USE_GPUTYPE, True), items(NOUSE_GPUTYPE, True),
                   items(USE_GPUUUID, False), items(NOUSE_GPUUUID, False))

    def refuses(self, device: GpuDevice) -> str | None:
        """Why the pod may not use this GPU, or None."""
        why = self.refuses_type(device.type)
        if why is not None:
            return why
        if self.use_uuids and device.uuid not in self.use_uuids:
            return f"not in {USE_GPUUUID}"
        if device.uuid in self.nouse_uuids:
            return f"excluded by {NOUSE_GPUUUID}"
        return None

    def refuses_type(self, gpu_type: str) -> str | None:
        kind = gpu_type.lower()
        if self.use_types and not any(t in kind for t in self.use_types):
            return f"type {gpu_type!r} is not in {USE_GPUTYPE}"
        if any(t in kind for t in self.nouse_types):
            return f"type {gpu_type!r} is excluded by {NOUSE_GPUTYPE}"
        return None


@dataclass(frozen=True, slots=True)
class PodRequest:
    containers: tuple[ContainerRequest, ...]  # only those that ask for a GPU
    selectors: Selectors = field(default_factory=Selectors)
    node_policy: SchedulerPolicy = "binpack"
    gpu_policy: SchedulerPolicy = "spread"
    rule: str = ""  # the policy rule that decided the most fields, for the assignment

    @property
    def wants_gpu(self) -> bool:
        return bool(self.containers)


@dataclass(frozen=True, slots=True)
class Denial:
    """The policy refuses the pod (on this node, when a rule matches node labels)."""

    message: str  # the policy's reason, its rule and file:line


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    inventory: NodeInventory
    used: Mapping[str, Usage] = field(default_factory=dict)  # by GPU UUID


@dataclass(frozen=True, slots=True)
class Fit:
    node: str
    assignment: PodAssignment
    footprint: Mapping[str, Usage]  # what the pod adds, by GPU UUID
    score: int  # 0..MAX_SCORE under the pod's node policy


@dataclass(frozen=True, slots=True)
class Misfit:
    node: str
    reason: str  # one line: the container, each GPU and what it lacks
    kinds: tuple[str, ...]  # for metrics: memory | cores | slices | exclusive | unhealthy |
    #                        selector | gpu_count | no_gpus | denied


# ---- footprints ----------------------------------------------------------------------------------

def pod_usage(assignment: PodAssignment) -> dict[str, Usage]:
    """What a bound pod holds on each GPU: app containers together, init containers one by one."""
    apps: dict[str, Usage] = {}
    inits: dict[str, Usage] = {}
    for c in assignment.containers:
        for d in c.devices:
            u = Usage(d.memory_mib, d.cores, 1)
            if c.init:
                inits[d.uuid] = inits.get(d.uuid, Usage()).peak(u)
            else:
                apps[d.uuid] = apps.get(d.uuid, Usage()) + u
    out = dict(apps)
    for uuid, u in inits.items():
        out[uuid] = out.get(uuid, Usage()).peak(u)
    return out


def node_usage(assignments: Iterable[PodAssignment]) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for a in assignments:
        for uuid, u in pod_usage(a).items():
            out[uuid] = out.get(uuid, Usage()) + u
    return out


def ledger_usage(allocations: NodeAllocations) -> dict[str, Usage]:
    """What the node's reservations hold on each GPU."""
    out: dict[str, Usage] = {}
    for r in allocations.reservations:
        for uuid, mem, cores, slices in r.gpus:
            out[uuid] = out.get(uuid, Usage()) + Usage(mem, cores, slices)
    return out


def reservation(uid: str, pod: str, at: int, footprint: Mapping[str, Usage]) -> Reservation:
    return Reservation(uid, pod, at, tuple((uuid, u.memory_mib, u.cores, u.slices)
                                           for uuid, u in sorted(footprint.items())))


# ---- fit -----------------------------------------------------------------------------------------

def _lacks(device: GpuDevice, used: Usage, c: ContainerRequest, split_count: int,
           ) -> tuple[str, str] | None:
    """(kind, explanation) of the first thing this GPU lacks for the container, or None."""
    if c.oversize(device):
        return "memory", (f"has {device.memory_mib}MiB in all, less than the "
                          f"{c.rule.gpumem_mib}MiB asked")
    if used.slices >= split_count:
        return "slices", f"all {split_count} slices taken"
    if device.cores and used.cores >= device.cores:
        return "exclusive", "its compute is fully given out"
    if c.cores >= 100 and used.slices > 0:
        return "exclusive", (f"needs the GPU alone (cores 100) but {used.slices} "
                             f"container{'s' if used.slices > 1 else ''} use it")
    if device.cores and used.cores + c.cores > device.cores:
        free = device.cores - used.cores
        return "cores", f"{free}% cores free, needs {c.cores}% ({c.cores - free} short)"
    need = c.memory_on(device)
    free_mib = device.memory_mib - used.memory_mib
    if need > free_mib:
        return "memory", f"{free_mib}MiB free, needs {need}MiB ({need - free_mib} short)"
    return None


def _order(devices: Iterable[GpuDevice], used: Mapping[str, Usage], split_count: int,
           policy: SchedulerPolicy) -> list[GpuDevice]:
    def key(d: GpuDevice) -> tuple[float, int]:
        r = used.get(d.uuid, Usage()).ratio(d, split_count)
        return (-r if policy == "binpack" else r, d.index)

    return sorted(devices, key=key)


Reason = tuple[int, str]  # (GPU index, what it lacks)


def _place_container(c: ContainerRequest, eligible: Sequence[GpuDevice],
                     refused: Sequence[Reason], used: Mapping[str, Usage], split_count: int,
                     policy: SchedulerPolicy) -> tuple[list[GpuDevice], list[Reason], list[str]]:
    """The GPUs for one container; when too few fit, the reasons of each one that did not."""
    chosen: list[GpuDevice] = []
    reasons: list[Reason] = list(refused)
    kinds: list[str] = []
    for d in _order(eligible, used, split_count, policy):
        lack = _lacks(d, used.get(d.uuid, Usage()), c, split_count)
        if lack is None:
            if len(chosen) < c.count:
                chosen.append(d)
        else:
            kinds.append(lack[0])
            reasons.append((d.index, lack[1]))
    return chosen, reasons, kinds


def _summary(reasons: Sequence[Reason], limit: int = 8) -> str:
    """GPUs lacking the same thing share one entry: `GPU0-3,6 20480MiB free, needs ...`."""
    groups: dict[str, list[int]] = {}
    for index, text in sorted(reasons):
        groups.setdefault(text, []).append(index)
    parts = [f"GPU{_ranges(ix)} {text}" for text, ix in groups.items()]
    shown = "; ".join(parts[:limit])
    return shown + (f"; and {len(parts) - limit} more" if len(parts) > limit else "")


def _ranges(indices: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    out: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(out)


def fit(node: NodeState, pod: PodRequest) -> Fit | Misfit:
    """Place every GPU container of the pod on this node, or say why it cannot."""
    inv = node.inventory
    if not inv.devices:
        return Misfit(node.name, "gpuwarden: the node has no GPUs registered", ("no_gpus",))
    eligible: list[GpuDevice] = []
    refused: list[Reason] = []
    refused_kinds: list[str] = []
    for d in sorted(inv.devices, key=lambda d: d.index):
        why = None if d.healthy else "unhealthy"
        if why is None:
            why = pod.selectors.refuses(d)
        if why is None:
            eligible.append(d)
        else:
            refused.append((d.index, why))
            refused_kinds.append("unhealthy" if why == "unhealthy" else "selector")
    base = dict(node.used)
    apps = dict(base)
    footprint_apps: dict[str, Usage] = {}
    footprint_inits: dict[str, Usage] = {}
    placed: list[ContainerAssignment] = []
    # App containers first, each against what the earlier ones took; init containers each
    # against the node without the pod (they run alone, before the app containers).
    order = [c for c in pod.containers if not c.init] + [c for c in pod.containers if c.init]
    for c in order:
        used = base if c.init else apps
        chosen, reasons, kinds = _place_container(c, eligible, refused, used, inv.split_count,
                                                  pod.gpu_policy)
        if len(chosen) < c.count:
            if c.count > len(inv.devices):
                return Misfit(node.name, f"gpuwarden: {c.describe()}; the node has "
                              f"{len(inv.devices)}", ("gpu_count",))
            return Misfit(node.name, f"gpuwarden: {c.describe()}, {len(chosen)} fit: "
                          f"{_summary(reasons)}",
                          tuple(sorted(set(kinds + refused_kinds))) or ("gpu_count",))
        grants = []
        for d in sorted(chosen, key=lambda d: d.index):
            g = DeviceGrant(d.uuid, d.index, c.memory_on(d), c.cores)
            grants.append(g)
            u = Usage(g.memory_mib, g.cores, 1)
            if c.init:
                footprint_inits[d.uuid] = footprint_inits.get(d.uuid, Usage()).peak(u)
            else:
                footprint_apps[d.uuid] = footprint_apps.get(d.uuid, Usage()) + u
                apps[d.uuid] = apps.get(d.uuid, Usage()) + u
        placed.append(ContainerAssignment(c.name, tuple(grants), init=c.init,
                                          priority=c.rule.priority,
                                          core_policy=c.rule.core_policy))
    footprint = dict(footprint_apps)
    for uuid, u in footprint_inits.items():
        footprint[uuid] = footprint.get(uuid, Usage()).peak(u)
    by_name = {c.name: c for c in placed}
    assignment = PodAssignment(node.name, tuple(by_name[c.name] for c in pod.containers),
                               rule=pod.rule)
    after = {d.uuid: base.get(d.uuid, Usage()) + footprint.get(d.uuid, Usage())
             for d in inv.devices}
    fullness = sum(after[d.uuid].ratio(d, inv.split_count) for d in inv.devices) / len(
        inv.devices)
    score = fullness if pod.node_policy == "binpack" else 1.0 - fullness
    return Fit(node.name, assignment, footprint, round(score * MAX_SCORE))


# ---- the fast path (the extender's filter over thousands of nodes) ------------------------------

# Per healthy GPU: (free memory MiB, free cores, free slices, slices used, memory MiB, cores,
# type). No UUID: nodes in the same state share one summary (and one decision of the filter).
Summary = tuple[tuple[int, int, int, int, int, int, str], ...]


def node_summary(node: NodeState) -> Summary:
    """What `quick_fits` needs of a node, computed once per node change."""
    out = []
    split = node.inventory.split_count
    for d in node.inventory.devices:
        if not d.healthy:
            continue
        u = node.used.get(d.uuid, Usage())
        out.append((d.memory_mib - u.memory_mib, d.cores - u.cores, split - u.slices, u.slices,
                    d.memory_mib, d.cores, d.type))
    return tuple(out)


def fullness(node: NodeState) -> float:
    """How full the node is, 0..1 (the mean of its GPUs' ratios)."""
    inv = node.inventory
    if not inv.devices:
        return 1.0
    return sum(node.used.get(d.uuid, Usage()).ratio(d, inv.split_count)
               for d in inv.devices) / len(inv.devices)


def quick_fits(summary: Summary, pod: PodRequest,
               memo: dict[int, int] | None = None) -> bool | None:
    """Whether the pod fits, decided from the summary alone for the common shape (one GPU
    container, no init container, no UUID selectors); None when `fit` must decide. Agrees with
    `fit` wherever it answers (a property test holds them together). `memo` keeps the
    container's need per GPU size; give one per pod."""
    sel = pod.selectors
    if len(pod.containers) != 1 or pod.containers[0].init or sel.use_uuids or sel.nouse_uuids:
        return None
    return fits_one(summary, pod.containers[0], {} if memo is None else memo,
                    None if sel == _NO_SELECTORS else sel)


def fits_one(summary: Summary, c: ContainerRequest, memo: dict[int, int],
             selectors: Selectors | None = None) -> bool:
    """`quick_fits` for one app container; memo: GPU MiB -> MiB needed (-1: never fits)."""
    cores, count, found = c.cores, c.count, 0
    for free_mem, free_cores, free_slices, used_slices, total_mem, total_cores, kind in summary:
        if free_slices <= 0 or (total_cores and (free_cores <= 0 or cores > free_cores)):
            continue
        if cores >= 100 and used_slices > 0:
            continue
        if selectors is not None and selectors.refuses_type(kind) is not None:
            continue
        need = memo.get(total_mem)
        if need is None:
            device = GpuDevice("", 0, total_mem, total_cores)
            need = memo[total_mem] = -1 if c.oversize(device) else c.memory_on(device)
        if need < 0 or need > free_mem:
            continue
        found += 1
        if found >= count:
            return True
    return False


_NO_SELECTORS = Selectors()


def choose(nodes: Iterable[NodeState], pod: PodRequest) -> tuple[Fit | None, list[Misfit]]:
    """The best node for the pod (highest score, then name) and the reasons of the others."""
    best: Fit | None = None
    misfits: list[Misfit] = []
    for n in nodes:
        r = fit(n, pod)
        if isinstance(r, Misfit):
            misfits.append(r)
        elif best is None or (r.score, best.node) > (best.score, r.node):
            best = r
    return best, misfits


# ---- the pod's request, through the policy -------------------------------------------------------

def _walk(expr: object) -> Iterable[ast.Field]:
    if isinstance(expr, ast.Field):
        yield expr
    elif isinstance(expr, tuple):
        for item in expr:
            yield from _walk(item)


def policy_node_keys(policy: CompiledPolicy) -> tuple[bool, frozenset[str]]:
    """Whether any rule matches on the node's name, and the node labels rules read: a pod's
    request depends on the node only through these."""
    uses_name = False
    labels = {NODE_LABEL_GPU_MEMORY}
    for rule in policy.rules:
        for f in _walk(rule.expr):
            if f.name == "node":
                uses_name = True
            elif f.name == "node_label" and f.key is not None:
                labels.add(f.key)
    return uses_name, frozenset(labels)


def denial_for(policy: CompiledPolicy, rule: EffectiveRule) -> str | None:
    """The policy's refusal as users read it: the reason, the rule and its file:line."""
    if rule.denied is None:
        return None
    name = rule.decided_by.get("denied", "")
    for r in policy.rules:
        if r.name == name:
            d = r.sets.get("admission") or next(
                (v for k, v in r.sets.items() if k.startswith("cap.") and v.behaviour == "deny"),
                None)
            span = d.span if d is not None else r.span
            return f'{rule.denied} (policy rule "{name}", {span.file}:{span.line})'
    return rule.denied


def _scheduler_policy(annotations: Mapping[str, str], key: str, default: SchedulerPolicy,
                      ) -> SchedulerPolicy:
    value = annotations.get(key, default)
    if value not in SCHEDULER_POLICIES:
        raise PlacementError(f"pod annotation {key}: {value!r} is not one of "
                             f"{' | '.join(SCHEDULER_POLICIES)}")
    return value  # type: ignore[return-value]  # checked against SCHEDULER_POLICIES


def node_key(uses_name: bool, label_keys: Sequence[str], node: str,
             labels: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a pod's request can depend on of a node, under a policy (`policy_node_keys`)."""
    return (node if uses_name else "", tuple((k, labels[k]) for k in label_keys if k in labels))


class PodPlanner:
    """A pod's `PodRequest` on each node, evaluated through the policy once per distinct value of
    what the policy reads of a node (its name, some labels): 1,000 nodes of one pool cost one
    evaluation. Pure: memoises, does no I/O."""

    def __init__(self, workloads: Sequence[PodWorkload], policy: CompiledPolicy,
                 annotations: Mapping[str, str], *, node_policy: SchedulerPolicy = "binpack",
                 gpu_policy: SchedulerPolicy = "spread",
                 node_keys: tuple[bool, frozenset[str]] | None = None) -> None:
        self.workloads = [w for w in workloads if w.uses_gpu]
        self.policy = policy
        self.selectors = Selectors.from_annotations(annotations)
        self.node_policy = _scheduler_policy(annotations, HAMI_NODE_POLICY, node_policy)
        self.gpu_policy = _scheduler_policy(annotations, HAMI_GPU_POLICY, gpu_policy)
        self.uses_name, self.label_keys = node_keys or policy_node_keys(policy)
        self._keys = sorted(self.label_keys)  # node_key's label_keys
        self._cache: dict[tuple[str, tuple[tuple[str, str], ...]], PodRequest | Denial] = {}

    @property
    def wants_gpu(self) -> bool:
        return bool(self.workloads)

    def rules(self, node: str = "", node_labels: Mapping[str, str] | None = None,
              ) -> list[tuple[PodWorkload, EffectiveRule]]:
        labels = dict(node_labels or {})
        return [(w, self.policy.evaluate(replace(w.workload, node=node, node_labels=labels)))
                for w in self.workloads]

    def request(self, node: str = "", node_labels: Mapping[str, str] | None = None,
                ) -> PodRequest | Denial:
        return self.request_for(node_key(self.uses_name, self._keys, node, node_labels or {}))

    def request_for(self, key: tuple[str, tuple[tuple[str, str], ...]]) -> PodRequest | Denial:
        """`request` by a `node_key` computed beforehand (the extender keeps one per node)."""
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._evaluate(key[0], dict(key[1]))
        return hit

    def _evaluate(self, node: str, labels: Mapping[str, str]) -> PodRequest | Denial:
        containers = []
        deciders: dict[str, int] = {}
        for w, rule in self.rules(node, labels):
            message = denial_for(self.policy, rule)
            if message is not None:
                return Denial(f"container {w.container}: {message}")
            containers.append(ContainerRequest(w.container, rule, init=w.init))
            for name in rule.matched_rules[:1]:
                deciders[name] = deciders.get(name, 0) + 1
        top = max(deciders.items(), key=lambda kv: kv[1])[0] if deciders else ""
        return PodRequest(tuple(containers), self.selectors, self.node_policy, self.gpu_policy,
                          rule=top)

