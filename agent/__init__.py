"""The node agent: loads and hot-reloads policy, finds workloads and their processes, samples
NVML, joins the shim, eBPF and NVML views, decides violations, enforces, exports metrics.

Decisions (`agent.decide`, `agent.model`) are pure: no clock, no signals, no I/O library. Every
I/O edge (NVML, netlink, procfs, BPF maps, region files) sits in its own small module that takes
its roots and libraries as parameters. The agent must not change another component's files or
maps except through their APIs (libvgpu.region, bpf.audit), and never signals a PID whose start
time differs from the one it recorded.
"""
