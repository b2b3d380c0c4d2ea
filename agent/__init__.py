"""The node agent: loads and hot-reloads policy, finds workloads and their processes, samples
NVML, joins the shim, eBPF and NVML views, decides violations, enforces, exports metrics.

Decisions (`agent.decide`) are pure; every I/O edge (NVML, netlink, procfs, BPF maps, region
files) sits in its own small module behind an interface that tests can replace.
"""
