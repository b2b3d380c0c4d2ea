"""The agent's three machine-wide I/O edges as interfaces: what it calls on NVML (pynvml), on the
eBPF probe (bpf.audit.AuditProbe, through BCC) and on the netlink process events
(agent.procevents.ProcEvents). agent.sources opens the real ones by default; a test passes
fakes (agent.daemon.Agent's nvml_lib, open_ebpf and open_procevents) and runs the whole agent in
its own process without a GPU, BCC, a netlink socket or root for those parts.

Only interfaces here: no I/O, nothing imported from the edges themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from agent.procevents import ProcEvent

__all__ = ["EbpfProbe", "NvmlLib", "OpenEbpf", "OpenProcEvents", "ProbeEvent", "ProcEventSource"]


# ---- NVML: the pynvml functions agent.nvml.NvmlSampler calls --------------------------------

class _MemoryInfo(Protocol):
    @property
    def total(self) -> int: ...
    @property
    def used(self) -> int: ...


class _Utilization(Protocol):
    @property
    def gpu(self) -> int: ...


class _ProcessInfo(Protocol):
    @property
    def pid(self) -> int: ...
    @property
    def usedGpuMemory(self) -> int | None: ...


class _UtilSample(Protocol):
    @property
    def pid(self) -> int: ...
    @property
    def timeStamp(self) -> int: ...
    @property
    def smUtil(self) -> int: ...


class NvmlLib(Protocol):
    """The part of pynvml the agent uses (the module itself, or a test's fake). A handle is
    whatever nvmlDeviceGetHandleByIndex returns, passed back unchanged."""

    @property
    def NVMLError(self) -> type[Exception]: ...
    @property
    def NVML_ERROR_NOT_FOUND(self) -> int: ...
    @property
    def NVML_ERROR_NOT_SUPPORTED(self) -> int: ...

    def nvmlInit(self) -> object: ...
    def nvmlShutdown(self) -> object: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _MemoryInfo: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> _Utilization: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetComputeRunningProcesses(
            self, handle: object) -> Iterable[_ProcessInfo]: ...
    def nvmlDeviceGetProcessUtilization(
            self, handle: object, last_seen: int) -> Iterable[_UtilSample]: ...


# ---- eBPF: what the agent calls on bpf.audit.AuditProbe -------------------------------------

class ProbeEvent(Protocol):
    """One audited driver call as the loop reads it (bpf.audit.AuditEvent)."""

    @property
    def kind(self) -> str: ...  # e.g. "mem_alloc", "proc_clear"
    @property
    def pid(self) -> int: ...
    @property
    def device(self) -> int: ...  # the process's CUDA ordinal; -1 unknown
    @property
    def bytes(self) -> int: ...
    @property
    def killed(self) -> bool: ...  # the in-kernel kill limit fired inside this call


class EbpfProbe(Protocol):
    """A started probe: the event stream, the in-kernel ledger, its counters and kill limits."""

    def fileno(self) -> int:
        """Readable when events wait; may raise: the loop then drains every EBPF_BATCH s."""
        ...

    def poll_events(self, timeout_ms: int = 0) -> Sequence[ProbeEvent]: ...
    def snapshot(self) -> Mapping[int, Mapping[int, int]]:
        """pid -> CUDA ordinal (-1: unknown) -> live bytes."""
        ...

    def rescan(self) -> object:
        """Attach to libcuda files that appeared since."""
        ...

    def errors(self) -> Mapping[str, int]:
        """Counters by name; "lost_event" and "queue_overflow" among them."""
        ...

    def set_kill_limit(self, pid: int, max_bytes: int) -> None: ...
    def clear_kill_limit(self, pid: int) -> None: ...
    def close(self, *, exiting: bool = False) -> None: ...


# `open_ebpf(libcuda files or None to discover)`: a started probe; raises when there can be none
# (no BCC, not root, no libcuda: the message is the agent's ebpf_reason).
OpenEbpf = Callable[[list[Path] | None], EbpfProbe]


# ---- process events: the netlink proc connector (agent.procevents.ProcEvents) ---------------

class ProcEventSource(Protocol):
    def fileno(self) -> int:
        """Readable when events wait."""
        ...

    def read(self) -> Sequence[ProcEvent]:
        """Every event queued now, never blocking; OSError when the kernel dropped some."""
        ...

    def close(self) -> None: ...


# `open_procevents()`: listening already; OSError when there can be none (the agent polls /proc).
OpenProcEvents = Callable[[], ProcEventSource]
