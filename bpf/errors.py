"""Errors of the audit: the in-kernel error counters' names (mirror of bpf/lib/errors.h, in
the same order) and the exceptions the loader raises.  No I/O."""

from __future__ import annotations

__all__ = ["ERROR_NAMES", "BpfUnavailable", "LibraryError"]

# Index i is enum gw_err value i (tests/bpf/test_struct_layout_matches_c.py compares them).
ERROR_NAMES: tuple[str, ...] = (
    "lost_event",
    "ptrs_full",
    "ledger_full",
    "procs_full",
    "ctx_full",
    "threads_full",
    "pending_full",
    "launches_full",
    "read_user",
    "ctx_stack",
    "kill_failed",
    "unknown_format",
    "replaced_ptr",
)


class BpfUnavailable(RuntimeError):
    """eBPF cannot run here; `problems` says why, one clear sentence each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("eBPF audit unavailable: " + "; ".join(problems))
        self.problems = problems


class LibraryError(ValueError):
    """A library given to the audit is not one it can probe."""
