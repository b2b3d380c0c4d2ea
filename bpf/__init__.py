"""eBPF audit: BCC programs (C in bpf/progs and bpf/lib) with one Python loader per program,
uprobes on libcuda's allocation, free and launch entry points, and the in-kernel ledger.

Knows nothing of policy or workloads: it reports what the driver was asked for, per process.
"""
