"""Whether a process that the shim lists still runs it. libvgpu registers a process in a slot of
its workload's region (pid and start time); a process that then exec()s a program without the
shim (LD_PRELOAD dropped, a clean environment) keeps its pid, its start time and so its slot, but
nothing in it enforces a limit any more. Such a process is told by its maps: the shim's file is
no longer mapped in it.

A look at the maps just after an exec may come before the dynamic loader has mapped the shim
again (an exec that keeps LD_PRELOAD): a process is judged to have unloaded the shim only when
a second look, at least EXEC_SETTLE later, still finds it missing. A look that finds nothing
(the process exited, is exiting, or its maps cannot be read) changes nothing: an exit is the
exit logic's, and an unreadable file is no evidence.

Pure: the caller reads the maps (agent.procfs.mapped) and passes what they said.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from agent.model import Pid

__all__ = ["EXEC_SETTLE", "Maps", "ShimCheck", "check_shims"]

EXEC_SETTLE = 1.0  # seconds between two looks that both find the shim missing


class Maps(StrEnum):
    """What one look at a process's maps found."""

    LOADED = "loaded"  # the shim's file is mapped
    MISSING = "missing"  # the maps were read, and the shim's file is not in them
    UNKNOWN = "unknown"  # nothing to go by: the process is gone or its maps unreadable


@dataclass(frozen=True)
class ShimCheck:
    """What is remembered of the looks at a workload's listed processes."""

    missing_since: Mapping[Pid, float] = field(default_factory=dict)  # first look without it
    unloaded: frozenset[Pid] = frozenset()  # listed, and judged to run without the shim


def check_shims(listed: frozenset[Pid], looks: Mapping[Pid, Maps], before: ShimCheck,
                now: float) -> ShimCheck:
    """The check after `looks` (this instant's, by pid; a listed pid not looked at keeps what
    was judged of it). Only listed processes are remembered. The processes counted as running
    the shim are `listed - result.unloaded`."""
    since = {p: at for p, at in before.missing_since.items() if p in listed}
    unloaded = set(before.unloaded & listed)
    for p, look in looks.items():
        if p not in listed:
            continue
        if look == Maps.LOADED:  # e.g. exec'd again with the shim
            since.pop(p, None)
            unloaded.discard(p)
        elif look == Maps.MISSING:
            first = since.setdefault(p, now)
            if now - first >= EXEC_SETTLE:
                unloaded.add(p)
    return ShimCheck(since, frozenset(unloaded))
