"""Pure decisions: from one Snapshot to verdicts, actions and the remembered history.

    judge(snapshot, policy) -> list[Verdict]        what is wrong right now
    decide(snapshot, policy, now) -> list[Action]    what to do about it, given the history
    remember(snapshot, policy, actions, now) -> History
    core_plan(workloads, occupancy) -> {(wid, gpu): CorePlan}   priority coordination

No I/O, no clock, no signals: the caller passes `now` and applies the actions (agent.enforce).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from agent.model import (
    Action,
    ActionKind,
    GpuUuid,
    Mode,
    Ongoing,
    Pid,
    Response,
    Rule,
    Snapshot,
    Verdict,
    VerdictKind,
    Workload,
    WorkloadKey,
)

__all__ = [
    "AgentPolicy",
    "CorePlan",
    "core_plan",
    "decide",
    "judge",
    "kernel_limit",
    "remember",
    "unmanaged_workloads",
]

UNMANAGED_KEY = WorkloadKey(namespace="", pod="unmanaged", container="unmanaged")


@dataclass(frozen=True)
class AgentPolicy:
    """The node-wide part of the policy that decide() needs beyond each workload's own rule."""

    unmanaged: Rule
    dry_run: bool = False
    protected: frozenset[Pid] = frozenset()
    compute_margin: float = 0.05  # share of one GPU tolerated above the cores limit
    # NVML is sampled, not read at the instant of the other sources: a verdict that only NVML
    # supports (e.g. a process seen a moment before its exit) must hold this long first.
    nvml_confirm_seconds: float = 1.5
    # The rule's bypass tolerance is for NVML, whose numbers include each process's context.
    # The eBPF ledger counts allocations exactly: beyond the limit it gets one allocation
    # granularity at most, whatever path allocated the memory.
    ebpf_slack_bytes: int = 64 << 20


def _sum(view: Mapping[Pid, Mapping[GpuUuid, int]] | None, pids: Iterable[Pid],
         gpu: GpuUuid) -> int | None:
    if view is None:
        return None
    return sum(view.get(p, {}).get(gpu, 0) for p in pids)


def _sum_f(view: Mapping[Pid, Mapping[GpuUuid, float]] | None, pids: Iterable[Pid],
           gpu: GpuUuid) -> float | None:
    if view is None:
        return None
    return sum(view.get(p, {}).get(gpu, 0.0) for p in pids)


def _gpus_of(w: Workload, s: Snapshot) -> set[GpuUuid]:
    gpus: set[GpuUuid] = set()
    for view in (s.ebpf, s.nvml_memory, s.nvml_sm):
        if view is not None:
            for p in w.pids:
                gpus.update(view.get(p, {}))
    gpus.update(g for g, used in (w.shim_used or {}).items() if used > 0)
    return gpus


def unmanaged_workloads(s: Snapshot, policy: AgentPolicy) -> list[Workload]:
    """One pseudo-workload per GPU process that no workload owns (protected ones excepted).

    Being on the GPU is judged by NVML (the driver's truth for these GPUs) when it is on; eBPF
    alone decides only without NVML, since its uprobes see every user of the library file,
    also processes on other (e.g. simulated) devices."""
    owned = {p for w in s.workloads for p in w.pids}
    view = s.nvml_memory if s.nvml_memory is not None else s.ebpf
    on_gpu = {p for p, per_gpu in (view or {}).items() if any(per_gpu.values())}
    return [
        Workload(wid=f"unmanaged:{p}", key=UNMANAGED_KEY, rule=policy.unmanaged,
                 pids=frozenset({p}), managed=False)
        for p in sorted(on_gpu - owned - policy.protected)
    ]


def _judge_one(w: Workload, s: Snapshot, policy: AgentPolicy,
               limited: Mapping[tuple[str, GpuUuid], bool]) -> list[Verdict]:
    out: list[Verdict] = []
    rule = w.rule
    tol = rule.bypass_tolerance_bytes
    shim_pids = set(w.shim_pids)
    for gpu in sorted(_gpus_of(w, s)):
        shim = None if w.shim_used is None else w.shim_used.get(gpu, 0)
        ebpf = _sum(s.ebpf, w.pids, gpu)
        nvml = _sum(s.nvml_memory, w.pids, gpu)
        sm = _sum_f(s.nvml_sm, w.pids, gpu)
        measured: dict[str, int | float | None] = {"shim": shim, "ebpf": ebpf, "nvml": nvml}

        def verdict(kind: VerdictKind, limit: int | float | None, detail: str,
                    sources: list[str], _gpu: GpuUuid = gpu,
                    _m: dict[str, int | float | None] = measured) -> Verdict:
            return Verdict(kind=kind, wid=w.wid, key=w.key, gpu=_gpu, rule=rule.name,
                           measured=dict(_m), limit=limit, detail=detail,
                           sources=tuple(sources))

        used = max(v or 0 for v in (shim, ebpf, nvml))
        if rule.denied:
            if used > 0:
                out.append(verdict(VerdictKind.DENIED, 0,
                                   f"uses GPU memory although denied: {rule.denied_reason}",
                                   [k for k in ("shim", "ebpf", "nvml") if measured[k]]))
            continue
        limit = rule.memory_limit(gpu)  # this GPU's own
        if limit.bytes is not None:
            room = tol if limit.bytes > 0 else 0  # a limit of 0 admits nothing, context included
            ebpf_room = min(room, policy.ebpf_slack_bytes)
            over = [name for name, v, slack in (("shim", shim, 0), ("ebpf", ebpf, ebpf_room),
                                                 ("nvml", nvml, room))
                    if v is not None and limit.exceeded_by(v, slack)]
            if over:
                out.append(verdict(VerdictKind.MEMORY, limit.bytes,
                                   f"memory above the limit by {', '.join(over)}", over))
        if w.managed and w.shim_used is not None:
            detail, sources = _bypass(w, s, gpu, shim_pids, shim or 0, tol)
            if detail:
                out.append(verdict(VerdictKind.BYPASS, tol, detail, sources))
        if rule.cores_percent > 0 and sm is not None and limited.get((w.wid, gpu), True):
            measured["sm_ratio"] = sm
            cap = rule.cores_percent / 100.0
            if sm > cap + policy.compute_margin:
                out.append(verdict(VerdictKind.COMPUTE, cap,
                                   f"compute share {sm:.2f} above {cap:.2f}", ["nvml"]))
    return out


def _bypass(w: Workload, s: Snapshot, gpu: GpuUuid, shim_pids: set[Pid], shim: int,
            tol: int) -> tuple[str, list[str]]:
    # A process whose slot the shim released on its way out still holds its memory until it
    # has exited, and the shim's count no longer includes it: neither a process without the
    # shim nor bytes beyond the shim's count.
    pids = w.pids - w.shim_leaving
    sources = set()
    without = set()
    for name, view in (("ebpf", s.ebpf), ("nvml", s.nvml_memory)):
        if view is not None:
            found = {p for p in pids - shim_pids if view.get(p, {}).get(gpu, 0) > 0}
            if found:
                sources.add(name)
                without |= found
    if without:
        return (f"{len(without)} process(es) on the GPU without the shim", sorted(sources))
    for name, view in (("ebpf", s.ebpf), ("nvml", s.nvml_memory)):
        v = _sum(view, pids, gpu)
        if v is not None and v - shim > tol:
            return f"{name} sees {v - shim} bytes more than the shim (tolerance {tol})", [name]
    return "", []


def _occupancy(workloads: Iterable[Workload], s: Snapshot) -> dict[GpuUuid, list[Workload]]:
    occ: dict[GpuUuid, list[Workload]] = {}
    for w in workloads:
        for gpu in _gpus_of(w, s):
            occ.setdefault(gpu, []).append(w)
    return occ


@dataclass(frozen=True)
class CorePlan:
    """What the agent writes into a workload's region for one GPU (libvgpu's compute limiter
    reads it), and what its compute share is judged against.

    `override` False: nothing (the shims of every container on the GPU see the node region and
    coordinate among themselves: libvgpu's policy/priority table, turns, claims, shares as
    weights); True: the effective cores limit (0 = not limited) and whether to yield to others.
    `cap_percent`: the share NVML's utilisation is held to in the compute verdict, 0 none."""

    override: bool
    effective_cores_percent: int
    yield_to_high: bool
    cap_percent: int


def coordinated(w: Workload, gpu: GpuUuid) -> bool:
    """Whether the workload's shims run on `gpu` (they admitted memory there) and see the node
    region: they then coordinate compute with the other containers there themselves."""
    return (w.managed and w.shim_used is not None and w.shim_used.get(gpu, 0) > 0
            and gpu not in w.shim_node_unknown)


def core_plan(occupancy: Mapping[GpuUuid, Iterable[Workload]]) -> dict[tuple[str, GpuUuid],
                                                                        CorePlan]:
    """Priority coordination. Where every workload on a GPU runs shims that see the node
    region, the agent writes no override: the shims coordinate among themselves, finer than it
    can (a high one claims the GPU only while busy, lows take what it leaves, `default` shares
    are weights), and a cap or a yield from the agent would undo that (a low told to yield waits
    as long as a high one merely holds memory on the GPU). Otherwise the agent coordinates: a
    workload alone on a GPU, or a high-priority one sharing only with high-priority ones, is not
    core-limited; otherwise its gpucores apply, and a low-priority workload yields while a
    high-priority one shares its GPU. Core policy `force` applies the gpucores always, `disable`
    never (GPU_CORE_UTILIZATION_POLICY's meaning). The compute verdict holds a workload to its
    gpucores where they are a cap: under `force`, or as the agent's own plan says."""
    plan: dict[tuple[str, GpuUuid], CorePlan] = {}
    for gpu, ws in occupancy.items():
        tenants = [w for w in ws if w.managed]
        any_high = any(w.rule.priority == "high" for w in tenants)
        all_high = all(w.rule.priority == "high" for w in tenants)
        by_shims = all(coordinated(w, gpu) for w in tenants)
        for w in tenants:
            if by_shims:
                cap = w.rule.cores_percent if w.rule.core_policy == "force" else 0
                plan[(w.wid, gpu)] = CorePlan(False, 0, False, cap)
                continue
            alone = len(tenants) == 1
            free = alone or all_high
            if w.rule.core_policy == "force":
                free = False
            elif w.rule.core_policy == "disable":
                free = True
            effective = 0 if free else w.rule.cores_percent
            plan[(w.wid, gpu)] = CorePlan(
                override=True,
                effective_cores_percent=effective,
                yield_to_high=not alone and w.rule.priority != "high" and any_high,
                cap_percent=effective,
            )
    return plan


def judge(s: Snapshot, policy: AgentPolicy) -> list[Verdict]:
    everyone = [*s.workloads, *unmanaged_workloads(s, policy)]
    plan = core_plan(_occupancy(s.workloads, s))
    limited = {k: v.cap_percent > 0 for k, v in plan.items()}
    return [v for w in everyone for v in _judge_one(w, s, policy, limited)]


def _dry(rule: Rule, policy: AgentPolicy) -> bool:
    return policy.dry_run or rule.mode == Mode.AUDIT


def decide(s: Snapshot, policy: AgentPolicy, now: float,
           verdicts: list[Verdict] | None = None) -> list[Action]:
    """The actions for this instant (`verdicts`: judge()'s, when already computed). Alerts
    once per violation; terminate then kill after the
    rule's grace; kill at once when the grace is 0; compute verdicts only count after the
    rule's compute grace. Protected processes are never signalled."""
    everyone = {w.wid: w for w in (*s.workloads, *unmanaged_workloads(s, policy))}
    actions: list[Action] = []
    acted: set[str] = set()
    for v in judge(s, policy) if verdicts is None else verdicts:
        w = everyone[v.wid]
        rule = w.rule
        seen = s.history.get(v.vkey)
        since = seen.since if seen else now
        if v.kind == VerdictKind.COMPUTE and now - since < rule.compute_grace_seconds:
            continue
        if set(v.sources) <= {"nvml"} and now - since < policy.nvml_confirm_seconds:
            continue
        dry = _dry(rule, policy)
        targets = tuple(sorted(w.pids - policy.protected))
        spared = tuple(sorted(w.pids & policy.protected))
        if seen is None or not seen.alerted:
            actions.append(Action(ActionKind.ALERT, w.wid, w.key, targets, v, dry, spared,
                                  reason=rule.alert_name, severity=rule.severity,
                                  policy_rule=rule.alert_rule or rule.name))
        if rule.response == Response.ALERT or w.wid in acted or not targets:
            continue
        step = _next_step(rule, seen, now)
        if step is not None:
            acted.add(w.wid)
            actions.append(Action(step, w.wid, w.key, targets, v, dry, spared,
                                  reason=f"{v.kind} violation"))
    actions.extend(_arming(s, policy))
    return actions


def _next_step(rule: Rule, seen: Ongoing | None, now: float) -> ActionKind | None:
    if seen is not None and seen.killed:
        return None
    if rule.response == Response.KILL and rule.grace_seconds <= 0:
        return ActionKind.KILL
    if seen is None or seen.terminated_at is None:
        return ActionKind.TERMINATE
    if now - seen.terminated_at >= rule.grace_seconds:
        return ActionKind.KILL
    return None


def kernel_limit(rule: Rule) -> int | None:
    """What one process may hold over all its GPUs (the kernel's ledger sums them): the sum of
    the rule's per-GPU limits, of its `gpus` largest when it lists more GPUs (its placement
    unknown), the limit on any other GPU standing in for those it does not list. None when one
    of them is unlimited."""
    n = max(1, rule.gpus)
    limits = [lim.bytes for lim in rule.memory_limits.values()]
    limits += [rule.memory_limit_default.bytes] * (n - len(limits))
    if any(b is None for b in limits):
        return None
    return sum(sorted((b for b in limits if b is not None), reverse=True)[:n])


def _arming(s: Snapshot, policy: AgentPolicy) -> list[Action]:
    """In-kernel kill limits: every process of a workload whose rule says kill with no grace
    gets the sum of its GPUs' memory limits (`kernel_limit`) plus eBPF's slack as an eBPF kill
    limit, so the crossing allocation itself is killed; limits of processes that no longer
    need one are cleared."""
    want: dict[Pid, tuple[int, Workload]] = {}
    if s.ebpf_can_kill:
        for w in s.workloads:
            r = w.rule
            total = kernel_limit(r)
            if (r.response == Response.KILL and r.grace_seconds <= 0 and not _dry(r, policy)
                    and total is not None and not r.denied):
                for p in w.pids - policy.protected:
                    slack = min(r.bypass_tolerance_bytes, policy.ebpf_slack_bytes)
                    want[p] = (total + slack, w)
    out: list[Action] = []
    for p, (limit, w) in sorted(want.items()):
        if s.armed.get(p) != limit:
            out.append(Action(ActionKind.ARM, wid=w.wid, key=w.key, pids=(p,),
                              limit_bytes=limit, reason="kill with no grace"))
    owner = {p: w for w in s.workloads for p in w.pids}
    for p in sorted(set(s.armed) - set(want)):
        holder = owner.get(p)
        out.append(Action(ActionKind.DISARM, wid=holder.wid if holder else "",
                          key=holder.key if holder else UNMANAGED_KEY, pids=(p,),
                          reason="no longer needed"))
    return out


def remember(s: Snapshot, policy: AgentPolicy, actions: Iterable[Action], now: float,
             verdicts: list[Verdict] | None = None
             ) -> dict[tuple[str, VerdictKind, GpuUuid], Ongoing]:
    """The history after this instant: ongoing violations keep their start; resolved ones are
    forgotten; alerts, terminations and kills are marked (for the whole workload)."""
    alerted = {a.verdict.vkey for a in actions if a.kind == ActionKind.ALERT and a.verdict}
    terminated = {a.wid for a in actions if a.kind == ActionKind.TERMINATE}
    killed = {a.wid for a in actions if a.kind == ActionKind.KILL}
    new: dict[tuple[str, VerdictKind, GpuUuid], Ongoing] = {}
    for v in judge(s, policy) if verdicts is None else verdicts:
        o = s.history.get(v.vkey) or Ongoing(since=now)
        if v.vkey in alerted:
            o = replace(o, alerted=True)
        if v.wid in terminated and o.terminated_at is None:
            o = replace(o, terminated_at=now)
        if v.wid in killed:
            o = replace(o, killed=True)
        new[v.vkey] = o
    return new
