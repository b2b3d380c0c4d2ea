"""`gpuwarden extender`: the scheduler extender (HTTP) and, with --webhook-port, the admission
webhook (HTTPS) in one process sharing the node cache.

Heavy imports (kubernetes, cryptography) happen inside the handler only.
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["default_policy_text", "register"]


def register(sub: Any) -> None:
    e = sub.add_parser(
        "extender", help="run the kube-scheduler extender and admission webhook",
        description="The kube-scheduler extender (POST /filter, /prioritize, /bind; GET "
        "/healthz, /readyz, /metrics) and, with --webhook-port, the admission webhook (POST "
        "/mutate, /validate over TLS). Exit status: 1 when the policy or settings are bad, "
        "2 on usage errors.")
    e.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="credentials (default: the pod's service account)")
    e.add_argument("--policy", action="append", default=[], metavar="PATH",
                   help="policy file or directory (repeatable); without one, the settings' "
                   "defaultGPUNum / defaultMem / defaultCores are the only rules")
    e.add_argument("--settings", default=None, metavar="FILE",
                   help="settings YAML with HAMi's keys (deviceSplitCount, defaultMem, "
                   "nodeSchedulerPolicy, schedulerName, ...)")
    e.add_argument("--node-scheduler-policy", choices=("binpack", "spread"), default=None,
                   help="prefer the fullest (binpack) or emptiest (spread) node")
    e.add_argument("--gpu-scheduler-policy", choices=("binpack", "spread"), default=None,
                   help="prefer the fullest (binpack) or emptiest (spread) GPU of a node")
    e.add_argument("--scheduler-name", default=None, metavar="NAME",
                   help="schedulerName the webhook gives GPU pods (default gpuwarden-scheduler)")
    e.add_argument("--address", default="127.0.0.1", metavar="ADDR",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 in a cluster)")
    e.add_argument("--port", type=int, default=8888, metavar="N",
                   help="extender HTTP port (default 8888; 0: any free port)")
    e.add_argument("--webhook-port", type=int, default=None, metavar="N",
                   help="serve the admission webhook over HTTPS on this port (0: any)")
    e.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                   help="webhook serving certificate (PEM), e.g. from a mounted Secret; "
                   "reloaded when the file changes")
    e.add_argument("--tls-key", type=Path, default=None, metavar="FILE",
                   help="its private key (PEM)")
    e.add_argument("--tls-generate", type=Path, default=None, metavar="DIR",
                   help="generate a CA and a serving certificate into DIR (ca.crt for the "
                   "webhook configuration's caBundle) when --tls-cert is not given")
    e.add_argument("--tls-hosts", default="", metavar="NAMES",
                   help="comma-separated DNS names / IPs for the generated certificate")
    e.set_defaults(handler=cmd_extender)


def default_policy_text(gpu: int, mem_mib: int, cores: int) -> str:
    """The policy an extender without --policy applies: the settings' defaults, no rules."""
    mem = f"{mem_mib}MiB" if mem_mib else "whole"
    return (f"version 1\n\ndefaults {{\n  gpu = {gpu}\n  gpumem = {mem}\n"
            f"  gpucores = {cores}%\n}}\n")


def _fail(code: int, message: str) -> int:
    print(f"gpuwarden extender: {message}", file=sys.stderr)
    return code


def cmd_extender(args: argparse.Namespace) -> int:
    from extender.certs import ReloadingTls, generate
    from extender.claims import review_claim
    from extender.kube import ApiError, KubeClusterApi
    from extender.policyfiles import stamp
    from extender.server import JsonServer
    from extender.service import Extender
    from extender.webhook import review
    from gpuwarden.config import SettingsError, load_settings
    from policy import load_policy, load_texts
    from policy.diagnostics import render_all

    try:
        settings = load_settings(args.settings, {
            "node_scheduler_policy": args.node_scheduler_policy,
            "gpu_scheduler_policy": args.gpu_scheduler_policy,
            "scheduler_name": args.scheduler_name})
    except SettingsError as err:
        return _fail(1, str(err))

    def load() -> Any:
        if args.policy:
            return load_policy(args.policy)
        return load_texts([("<settings defaults>", default_policy_text(
            settings.default_gpu_num, settings.default_mem_mib, settings.default_cores))])

    loaded = load()
    if not loaded.ok:
        print(render_all(loaded.diagnostics), file=sys.stderr)
        return _fail(1, "the policy has errors; not starting")

    def log(event: dict[str, Any]) -> None:
        print(json.dumps(event), file=sys.stderr, flush=True)

    try:
        api = KubeClusterApi(args.kubeconfig)
    except Exception as err:
        return _fail(2, f"cannot reach the Kubernetes API: {err}")
    ext = Extender(api, loaded.policy, settings, log=log).start()
    try:
        srv = JsonServer((args.address, args.port), {"/filter": ext.filter,
                                                      "/prioritize": ext.prioritize,
                                                      "/bind": ext.bind},
                         lambda: ext.ready, ext.metrics.registry).start()
    except OSError as err:
        return _fail(2, f"--address {args.address} --port {args.port}: {err.strerror or err}")
    where = f"extender on http://{args.address}:{srv.port}/"
    hook = None
    if args.webhook_port is not None:
        try:
            if args.tls_cert is None:
                if args.tls_generate is None:
                    return _fail(2, "--webhook-port needs --tls-cert/--tls-key (e.g. from a "
                                 "Secret) or --tls-generate DIR with --tls-hosts")
                made = generate(args.tls_generate,
                                [h.strip() for h in args.tls_hosts.split(",") if h.strip()])
                cert, key = made.cert, made.key
            else:
                if args.tls_key is None:
                    return _fail(2, "--tls-cert needs --tls-key")
                cert, key = args.tls_cert, args.tls_key
            tls = ReloadingTls(cert, key).start()
        except ValueError as err:
            return _fail(2, str(err))

        def read_pod(namespace: str, name: str) -> Any:
            try:
                return ext.api.read_pod(namespace, name)
            except ApiError as err:
                if err.status == 404:
                    return None
                raise

        def answer(mutate: bool) -> Any:
            def route(body: Any) -> Any:
                kind = ((body.get("request") or {}).get("kind") or {}).get("kind") \
                    if isinstance(body, dict) else None
                if kind == "ResourceClaim":
                    result = review_claim(body, ext.policy, settings, read_pod)
                else:
                    result = review(body, ext.policy, settings, ext.capacity, mutate)
                ext.metrics.admissions.labels(
                    result="allowed" if result["response"]["allowed"] else "refused").inc()
                return result
            return route

        try:
            hook = JsonServer((args.address, args.webhook_port),
                              {"/mutate": answer(True), "/validate": answer(False)},
                              lambda: ext.ready, ext.metrics.registry, tls=tls.context).start()
        except OSError as err:
            return _fail(2, f"--webhook-port {args.webhook_port}: {err.strerror or err}")
        where += f"; webhook on https://{args.address}:{hook.port}/"

    stop = threading.Event()

    files = list(loaded.files)  # the policy files last loaded, includes too
    seen = [stamp(args.policy, files)]

    def reload() -> None:
        again = load()
        if again.files:
            files[:] = again.files
        seen[0] = stamp(args.policy, files)
        if again.ok:
            ext.set_policy(again.policy)
            log({"event": "policy_reloaded", "files": list(again.files)})
        else:
            log({"event": "policy_reload_failed", "kept": "the last good policy",
                 "errors": [d.render() for d in again.errors]})

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: reload())
    print(f"gpuwarden extender: {where}; waiting for the node and pod caches", file=sys.stderr,
          flush=True)
    while not stop.wait(0.2):
        if ext.ready:
            # the caches are the big, long-lived heap: keep the collector from walking them
            # on every full collection (a 1,000-node cache made filter's p99 jump)
            gc.freeze()
            print("gpuwarden extender: ready", file=sys.stderr, flush=True)
            break
    while not stop.wait(5.0):  # the policy files changed (a ConfigMap update): load them again
        if args.policy and stamp(args.policy, files) != seen[0]:
            reload()
    srv.shutdown()
    if hook is not None:
        hook.shutdown()
    ext.stop()
    return 0
