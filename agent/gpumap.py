"""Which GPU a process means by its CUDA device ordinal (pure).

The eBPF ledger records the ordinal a process passed to the driver (cuDeviceGet's numbering), but
that numbering is the process's own: a container sees only the GPUs its runtime exposed
(NVIDIA_VISIBLE_DEVICES), renumbered from 0, and CUDA_VISIBLE_DEVICES narrows and reorders them
again. Taking ordinal i as the node's GPU i charges a pod on GPU 3 to GPU 0, where the shim has
counted nothing: a false bypass. The agent works out each process's ordinal -> UUID list from, in
order of trust:

1. NVML: the GPUs on which NVML lists the (host) pid, when there are as many as ordinals used.
   CUDA keeps the relative (PCI) order of the GPUs it is shown, so the i-th smallest ordinal is
   the i-th of those GPUs by NVML index.
2. The process's environment at exec: NVIDIA_VISIBLE_DEVICES, then CUDA_VISIBLE_DEVICES.
3. The node's order (a process that sees every GPU, unrenumbered).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agent.model import GpuUuid, Pid

__all__ = ["ebpf_by_uuid", "visible_gpus"]


def _select(entries: str, base: Sequence[str]) -> list[str] | None:
    """CUDA's reading of a *_VISIBLE_DEVICES list over `base`: indices or UUID prefixes, up to
    the first entry that names no GPU (CUDA ignores the rest). None: entries it cannot map
    (MIG devices)."""
    out: list[str] = []
    for raw in entries.split(","):
        item = raw.strip()
        if item.isdigit():
            if int(item) >= len(base):
                break
            chosen = base[int(item)]
        elif item.startswith("GPU-"):
            hits = [u for u in base if u.startswith(item)]
            if len(hits) != 1:
                break
            chosen = hits[0]
        elif item.startswith("MIG-"):
            return None
        else:
            break
        if chosen in out:  # a repeated device ends the list, as in CUDA
            break
        out.append(chosen)
    return out


def visible_gpus(nvidia_visible: str | None, cuda_visible: str | None,
                 node_uuids: Sequence[str]) -> list[str] | None:
    """The GPUs a process sees, in its ordinal order, from its environment; None when the
    environment does not say (or says something this cannot map)."""
    base: list[str] | None = list(node_uuids)
    if nvidia_visible is not None and nvidia_visible.strip() not in ("", "all"):
        value = nvidia_visible.strip()
        base = [] if value in ("none", "void") else _select(value, node_uuids)
    if base is None:
        return None
    if cuda_visible is not None:
        return _select(cuda_visible, base) if cuda_visible.strip() else []
    return base if nvidia_visible is not None else None


def ebpf_by_uuid(
    ledger: Mapping[int, Mapping[int, int]],
    node_uuids: Sequence[str],
    nvml_gpus: Mapping[Pid, Sequence[str]],
    env_gpus: Callable[[Pid], Sequence[str] | None],
) -> dict[Pid, dict[GpuUuid, int]]:
    """The eBPF ledger {pid: {ordinal: bytes}} per GPU UUID. `nvml_gpus`: per pid, the GPUs NVML
    lists it on, by NVML index; `env_gpus(pid)`: visible_gpus() of its environment, asked only
    for a process NVML does not place on a node of several GPUs (it reads /proc). Ordinal -1 (a
    context the probe did not see made) goes to the process's only GPU when it has one, else to
    the node's first."""
    out: dict[Pid, dict[GpuUuid, int]] = {}
    for pid_raw, per in ledger.items():
        pid = Pid(pid_raw)
        used = sorted(o for o, b in per.items() if b and o >= 0)
        seen = list(nvml_gpus.get(pid, ()))
        if used and len(seen) == len(used):
            order: list[str] = [""] * (max(used) + 1)
            for o, u in zip(used, seen, strict=True):
                order[o] = u
        elif len(node_uuids) > 1:
            order = list(env_gpus(pid) or node_uuids)
        else:
            order = list(node_uuids)
        only = order[0] if len({u for u in order if u}) == 1 else None
        for o, b in per.items():
            if not b:
                continue
            if 0 <= o < len(order) and order[o]:
                u = order[o]
            elif o < 0 and (only or node_uuids):
                u = only or node_uuids[0]
            else:
                u = f"device-{o}"
            d = out.setdefault(pid, {})
            d[GpuUuid(u)] = d.get(GpuUuid(u), 0) + b
    return out
