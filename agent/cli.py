"""`gpuwarden agent`, `gpuwarden run`, `gpuwarden top` and `gpuwarden demo`.

Heavy imports (pynvml, bcc, pyroute2) happen inside the handlers only.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gpuwarden.argtypes import count, port, seconds
from gpuwarden.config import MAX_SPLIT
from gpuwarden.resources import DEVICE_SPLIT_COUNT

__all__ = ["register"]


def register(sub: Any) -> None:
    a = sub.add_parser("agent", help="run the node agent (standalone, or --kubernetes)",
                       description="The node agent: loads and hot-reloads the policy, audits "
                       "GPU processes (shim, eBPF, NVML), enforces, exports metrics.")
    a.add_argument("--policy", required=True, action="append", metavar="PATH",
                   help="policy file or directory (repeatable)")
    a.add_argument("--standalone", action="store_true",
                   help="no Kubernetes: workloads come from `gpuwarden run` (the default; "
                   "the opposite of --kubernetes)")
    a.add_argument("--kubernetes", action="store_true",
                   help="cluster mode: the workloads are the GPU containers of this node's "
                   "pods (watched through the API server); verdicts also become Events on "
                   "the pods")
    a.add_argument("--node", default=None, metavar="NAME",
                   help="with --kubernetes: this node's name (default: $NODE_NAME, else the "
                   "host name)")
    a.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="with --kubernetes: credentials (default: the pod's service account, "
                   "else $KUBECONFIG)")
    a.add_argument("--regions-root", default=None, metavar="DIR",
                   help="with --kubernetes: where the device plugin keeps each container's "
                   "region (default /var/lib/gpuwarden/containers)")
    a.add_argument("--metrics-port", type=port, default=None, metavar="N",
                   help="serve /metrics and /healthz on this port (0: any free port)")
    a.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDR",
                   help="address to serve /metrics on (default 127.0.0.1; 0.0.0.0 for every "
                   "interface, e.g. for a Prometheus on another host)")
    a.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="control socket, audit log, workload records and regions "
                   "(default: $GPUWARDEN_STATE_DIR or /run/gpuwarden)")
    a.add_argument("--dry-run", action="store_true",
                   help="record what would be done (would_kill) instead of signalling")
    a.add_argument("--audit-unmanaged", action="store_true",
                   help="GPU processes that no workload owns: record would_* only, never "
                   "signal them (whatever the policy's unmanaged block says)")
    a.add_argument("--protect", action="append", default=[], metavar="PID|NAME",
                   help="never signal this PID or process name (repeatable)")
    a.add_argument("--no-ebpf", action="store_true", help="do not load the eBPF audit")
    a.add_argument("--libcuda", action="append", type=Path, default=None, metavar="PATH",
                   help="libcuda file(s) for the eBPF uprobes (default: discover)")
    a.add_argument("--tick", type=seconds(maximum=60), default=1.0, metavar="SECONDS",
                   help="loop period when no event asks for a loop earlier (default 1)")
    a.add_argument("--split-count", type=count(1, MAX_SPLIT, "slices"),
                   default=None, metavar="N",
                   help="standalone: how many workloads may share one GPU (its slices, as "
                   f"the device plugin's deviceSplitCount; default {DEVICE_SPLIT_COUNT})")
    a.add_argument("--quiet", action="store_true", help="audit events to the file only")
    a.set_defaults(handler=cmd_agent)

    r = sub.add_parser("run", help="run a command as a workload under the agent",
                       description="Ask the agent for the effective rule, then exec CMD with "
                       "the slice's environment and libvgpu preloaded. Exit status: CMD's; 1 "
                       "when the policy denies it; 2 when the agent cannot be reached.")
    r.add_argument("--name", default=None,
                   help="workload name, like a pod's (default: the command's file name)")
    r.add_argument("--namespace", default="default",
                   help="namespace the policy matches on, like a pod's (default: default)")
    r.add_argument("--label", action="append", default=[], metavar="K=V",
                   help="a label the policy matches on, like a pod's (repeatable); "
                   "e.g. examples/policies enforce only workloads with a `team` label")
    r.add_argument("--gpu", type=int, default=None, metavar="N",
                   help="number of GPUs (default 1)")
    r.add_argument("--gpumem", default=None, metavar="SIZE",
                   help="device memory per GPU: 3GiB, 1.5GiB, 512M, 3000m or 3000 (a bare "
                   "number is MiB); the policy may cap or deny it")
    r.add_argument("--gpumem-percentage", type=int, default=None, metavar="P",
                   help="device memory per GPU as a percentage of it, 1..100 (instead of "
                   "--gpumem)")
    r.add_argument("--gpucores", default=None, metavar="P",
                   help="share of one GPU's compute: 30 or 30%% (0: no compute limit)")
    r.add_argument("--priority", choices=["high", "low"], default=None,
                   help="high-priority workloads run unthrottled; low ones yield to them")
    r.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="the agent's state dir, where its control socket is (default: "
                   "$GPUWARDEN_STATE_DIR or /run/gpuwarden)")
    r.add_argument("--wait", type=seconds(zero_ok=True), default=10.0, metavar="SECONDS",
                   help="wait this long for an agent that is still starting (default 10; "
                   "0: fail at once)")
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD...",
                   help="the command to run in the slice")
    r.set_defaults(handler=cmd_run)

    t = sub.add_parser("top", help="live table of workloads (memory, cores, sources, actions)")
    t.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                   help="the agent's state dir (default: $GPUWARDEN_STATE_DIR or /run/gpuwarden)")
    t.add_argument("--once", action="store_true", help="print one table and exit")
    t.add_argument("--interval", type=seconds(maximum=3600), default=1.0, metavar="SECONDS",
                   help="refresh period of the live table (default 1)")
    t.set_defaults(handler=cmd_top)

    d = sub.add_parser("demo", help="the standalone demo: agent + three workloads")
    d.add_argument("--policy", default=None, metavar="PATH",
                   help="policy file or dir (default examples/policies)")
    d.add_argument("--keep", action="store_true",
                   help="leave the agent running at the end, to look at /metrics and "
                   "`gpuwarden top` (the demo prints how to stop it)")
    d.add_argument("--torch", action="store_true",
                   help="on a real GPU: PyTorch workloads (examples/demo/torch_job.py) instead "
                   "of the C one")
    d.set_defaults(handler=cmd_demo)


def cmd_agent(args: argparse.Namespace) -> int:
    from agent.ledger import default_state_dir
    from agent.service import serve

    state = args.state_dir or default_state_dir()
    if args.standalone and args.kubernetes:
        print("gpuwarden agent: --standalone and --kubernetes: choose one", file=sys.stderr)
        return 2
    if args.kubernetes and args.split_count is not None:
        print("gpuwarden agent: --split-count is for standalone admission; with --kubernetes "
              "the device plugin's deviceSplitCount says how many pods share a GPU",
              file=sys.stderr)
        return 2
    cluster = None
    if args.kubernetes:
        from agent.service import cluster_mode

        try:
            cluster = cluster_mode(args.node, args.kubeconfig, args.regions_root)
        except Exception as err:
            print(f"gpuwarden agent: cannot reach the Kubernetes API: {err}", file=sys.stderr)
            return 2
    elif args.node or args.kubeconfig or args.regions_root:
        print("gpuwarden agent: --node, --kubeconfig and --regions-root need --kubernetes",
              file=sys.stderr)
        return 2
    return serve(cluster=cluster, policy=args.policy, state_dir=state,
                 metrics_port=args.metrics_port,
                 metrics_host=args.metrics_host, dry_run=args.dry_run, protect=args.protect,
                 audit_unmanaged=args.audit_unmanaged,
                 ebpf=not args.no_ebpf, libcuda=args.libcuda, tick=args.tick,
                 quiet=args.quiet, split_count=args.split_count or DEVICE_SPLIT_COUNT)


def cmd_run(args: argparse.Namespace) -> int:
    from agent.runner import run

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("gpuwarden run: no command given; usage: gpuwarden run [options] -- CMD...",
              file=sys.stderr)
        return 2
    return run(args, cmd)


def cmd_top(args: argparse.Namespace) -> int:
    from agent.top import top

    return top(args.state_dir, once=args.once, interval=args.interval)


def cmd_demo(args: argparse.Namespace) -> int:
    script = Path(__file__).resolve().parent.parent / "examples" / "demo" / "run_demo.sh"
    if not script.exists():
        print(f"gpuwarden demo: {script} is missing (run from a source checkout)",
              file=sys.stderr)
        return 2
    argv = [str(script)] + (["--policy", args.policy] if args.policy else []) + (
        ["--keep"] if args.keep else []) + (["--torch"] if args.torch else [])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execv("/bin/bash", ["bash", *argv])
    return 2  # not reached
