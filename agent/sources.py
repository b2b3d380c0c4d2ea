"""The machine-wide sources of the agent's snapshot: NVML (the GPUs, per-process memory and SM
share), the eBPF ledger of libcuda calls (per-process bytes, kernel kills) and the netlink
process events (fork/exit). Each is opened once, may be missing (no driver, not root, an old
kernel: the reason is kept for the metrics and the start-up line), and is read by the loop.

The per-workload source, the libvgpu region, is agent.workloads.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent.gpumap import ebpf_by_uuid, visible_gpus
from agent.model import GpuUuid, Pid
from agent.procfs import environ_values, start_time

if TYPE_CHECKING:
    from agent.edges import EbpfProbe, NvmlLib, OpenEbpf, OpenProcEvents, ProcEventSource
    from agent.nvml import Device, NvmlSample, NvmlSampler

__all__ = ["Sources", "open_audit_probe", "open_netlink_procevents", "ring_fd"]


def open_audit_probe(libs: list[Path] | None) -> EbpfProbe:
    """The real eBPF edge: bpf.audit's probe, compiled by BCC, attached and started."""
    from bpf.audit import AuditProbe

    probe = AuditProbe(libs=libs, launch_counters=False).start()
    from agent.memtrim import trim_after_compile

    trim_after_compile()  # the compiler's memory is not needed any more
    return probe


def open_netlink_procevents() -> ProcEventSource:
    """The real process-events edge: the netlink proc connector."""
    from agent.procevents import ProcEvents

    return ProcEvents.open()


def ring_fd(probe: EbpfProbe) -> int | None:
    """A file descriptor that becomes readable when the probe's ring buffer has events; None
    when the probe offers none (the loop then drains the ring buffer every EBPF_BATCH s)."""
    try:
        return int(probe.fileno())
    except Exception:
        return None


class Sources:
    """NVML, eBPF and process events, and what was last read from them."""

    def __init__(self, nvml_lib: NvmlLib | None, ebpf: bool, libcuda: list[Path] | None,
                 proc_root: str, open_ebpf: OpenEbpf | None = None,
                 open_procevents: OpenProcEvents | None = None) -> None:
        """`nvml_lib` (pynvml when None), `open_ebpf` (open_audit_probe when None) and
        `open_procevents` (open_netlink_procevents when None): the edges (agent.edges)."""
        self._nvml_lib = nvml_lib
        self._want_ebpf = ebpf
        self._libcuda = libcuda
        self._open_probe: OpenEbpf = open_ebpf or open_audit_probe
        self._open_events: OpenProcEvents = open_procevents or open_netlink_procevents
        self.proc_root = proc_root
        self.devices: list[Device] = []
        self.nvml: NvmlSampler | None = None
        self.nvml_reason = "not started"
        self.nvml_sample: NvmlSample | None = None
        self.nvml_next = 0.0
        self.ebpf: EbpfProbe | None = None
        self.ebpf_reason = "disabled (--no-ebpf)" if not ebpf else "not started"
        self.ring_fd: int | None = None
        self.ebpf_view: dict[Pid, dict[GpuUuid, int]] | None = None
        self.ebpf_counters = (0, 0)  # lost events, other errors
        self._ebpf_counters_next = 0.0
        self.next_rescan = 0.0
        self.procevents: ProcEventSource | None = None
        self._env_gpus: dict[tuple[int, int], list[str] | None] = {}

    # ---- opening ----------------------------------------------------------------------------

    def open(self) -> None:
        self._open_nvml()
        self._open_ebpf()
        self._open_procevents()

    def _open_nvml(self) -> None:
        from agent.nvml import NvmlSampler

        try:
            sampler = NvmlSampler(self._nvml_lib)
            self.devices = sampler.open()
            self.nvml = sampler
            self.nvml_reason = ""
        except Exception as err:  # no driver, no GPU: the agent runs on without NVML
            self.nvml_reason = f"{type(err).__name__}: {err}"

    def _ebpf_libs(self) -> list[Path] | None:
        if self._libcuda is not None:
            return self._libcuda
        if os.environ.get("GPUWARDEN_SIM_STATE"):
            with contextlib.suppress(Exception):
                from libvgpu.paths import sim_lib_dir

                return [(sim_lib_dir() / "libcuda.so.1").resolve()]
        return None

    def _open_ebpf(self) -> None:
        if not self._want_ebpf:
            return
        try:
            self.ebpf = self._open_probe(self._ebpf_libs())
            self.ebpf_reason = ""
            self.ring_fd = ring_fd(self.ebpf)
        except Exception as err:  # no BCC, not root, no libcuda: the agent runs on without
            self.ebpf = None
            first = err.args[0] if err.args else None
            msg = "; ".join(map(str, first)) if isinstance(first, list) else str(err)
            if os.geteuid() != 0:
                msg = f"not running as root ({msg})"
            self.ebpf_reason = f"{type(err).__name__}: {msg}"

    def _open_procevents(self) -> None:
        try:
            self.procevents = self._open_events()
        except OSError as err:
            self.procevents = None
            print(f"gpuwarden agent: process events unavailable ({err}); polling /proc",
                  file=sys.stderr)

    # ---- reading ----------------------------------------------------------------------------

    def total_bytes(self, uuids: list[str]) -> int | None:
        """The size of the first of `uuids` (any GPU when empty) that NVML knows."""
        for d in self.devices:
            if not uuids or d.uuid in uuids:
                return int(d.total_bytes)
        return None

    def sample(self, now: float, rescan_seconds: float, nvml_seconds: float,
               start_of: Callable[[Pid], int | None]) -> None:
        """One loop's readings: libcuda files rescanned when due, NVML sampled when due (half
        as often with eBPF on: it is then the second opinion), the eBPF ledger by GPU UUID."""
        if self.ebpf is not None and now >= self.next_rescan:
            self.next_rescan = now + rescan_seconds
            with contextlib.suppress(Exception):
                self.ebpf.rescan()
        if self.nvml is not None and now >= self.nvml_next:
            self.nvml_next = now + nvml_seconds * (2 if self.ebpf else 1)
            try:
                self.nvml_sample = self.nvml.sample()
                self.nvml_reason = ""
            except Exception as err:
                self.nvml_reason = f"sampling failed: {err}"
                self.nvml_sample = None
        self.ebpf_view = self._read_ebpf(start_of)

    def read_ebpf_counters(self, now: float) -> None:
        """The probe's lost-event and error counters: kernel map reads, once a second."""
        if self.ebpf is not None and now >= self._ebpf_counters_next:
            self._ebpf_counters_next = now + 1.0
            with contextlib.suppress(Exception):
                errs = self.ebpf.errors()
                self.ebpf_counters = (
                    errs["lost_event"] + errs["queue_overflow"],
                    sum(v for k, v in errs.items()
                        if k not in ("lost_event", "queue_overflow")))

    def nvml_memory(self) -> dict[Pid, dict[GpuUuid, int]]:
        """NVML's per-process memory of the last sample ({} without one)."""
        return self.nvml_sample.memory if self.nvml_sample is not None else {}

    def gpu_pids(self) -> set[int]:
        """The processes eBPF or NVML last saw on a GPU."""
        seen: set[int] = set(self.ebpf_view or {})
        seen.update(self.nvml_memory())
        return seen

    def _read_ebpf(self, start_of: Callable[[Pid], int | None]
                   ) -> dict[Pid, dict[GpuUuid, int]] | None:
        if self.ebpf is None:
            return None
        uuids: list[str] = [d.uuid for d in self.devices]
        ledger = self.ebpf.snapshot()
        nvml = self.nvml_memory()
        nvml_gpus = {Pid(pid): [u for u in uuids if u in nvml.get(Pid(pid), {})]
                     for pid in ledger}
        return ebpf_by_uuid(ledger, uuids, nvml_gpus,
                            lambda pid: self._visible_gpus(pid, uuids, start_of))

    def _visible_gpus(self, pid: int, uuids: list[str],
                      start_of: Callable[[Pid], int | None]) -> list[str] | None:
        """The GPUs a process's environment at exec shows it (gpumap.visible_gpus), cached per
        process (pid and start time; a workload's start time is already known)."""
        start = start_of(Pid(pid)) or start_time(pid, self.proc_root)
        if start is None:
            return None
        cache = self._env_gpus
        key = (pid, start)
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            env = environ_values(pid, ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
                                 self.proc_root)
            cache[key] = visible_gpus(env.get("NVIDIA_VISIBLE_DEVICES"),
                                      env.get("CUDA_VISIBLE_DEVICES"), uuids)
        return cache[key]

    def forget_environment(self, pid: Pid) -> None:
        """A process exec()ed: its environment, and so the GPUs it may see, may be new (the pid
        and start time that key the cache are not)."""
        for key in [k for k in self._env_gpus if k[0] == pid]:
            del self._env_gpus[key]

    # ---- closing ----------------------------------------------------------------------------

    def close_early(self) -> None:
        """Everything but the eBPF probes (their teardown is slow: close_ebpf, last)."""
        if self.procevents is not None:
            self.procevents.close()
        if self.nvml is not None:
            self.nvml.close()

    def close_ebpf(self, exiting: bool) -> None:
        if self.ebpf is not None:
            with contextlib.suppress(Exception):
                self.ebpf.close(exiting=True) if exiting else self.ebpf.close()
