"""`gpuwarden run`: admit CMD as a workload through the agent, then exec it with the slice's
environment (libvgpu preloaded, region, limits, workload marker). The exec keeps this PID, which
the agent registered from the socket's peer credentials, so CMD and its children are the
workload and the exit status is CMD's."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from agent.control import request
from agent.ledger import default_state_dir
from agent.rules import request_from_flags

__all__ = ["run"]


def _labels(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ValueError(f"--label {item!r}: expected KEY=VALUE (e.g. --label team=nlp)")
        out[k] = v
    return out


def admit(sock: Path, req: dict[str, Any], wait: float) -> dict[str, Any]:
    """Ask the agent at `sock`; while it is not up yet (an agent just started in the
    background), retry for `wait` seconds, saying so once."""
    deadline = time.monotonic() + wait
    said = False
    while True:
        try:
            return request(sock, req)
        except OSError:
            if time.monotonic() >= deadline:
                raise
            if not said:
                print(f"gpuwarden run: waiting up to {wait:g} s for the agent at {sock}",
                      file=sys.stderr, flush=True)
                said = True
            time.sleep(0.1)


def run(args: argparse.Namespace, cmd: list[str]) -> int:
    try:
        labels = _labels(args.label)
        req = request_from_flags(args.gpumem, args.gpumem_percentage, args.gpucores,
                                 args.priority, args.gpu)
    except ValueError as err:
        print(f"gpuwarden run: {err}", file=sys.stderr)
        return 2
    state: Path = args.state_dir or default_state_dir()
    name = args.name or Path(cmd[0]).name
    try:
        answer = admit(state / "agent.sock", {"op": "admit", "name": name,
                                              "namespace": args.namespace,
                                              "labels": labels, "request": req}, args.wait)
    except (OSError, ValueError) as err:
        print(f"gpuwarden run: {err}", file=sys.stderr)
        return 2
    if not answer.get("ok"):
        print(f"gpuwarden run: {args.namespace}/{name}: {answer.get('error')}", file=sys.stderr)
        return int(answer.get("code") or 1)
    limits = ", ".join(f"{b / (1 << 20):.0f} MiB" if b is not None else "no limit"
                       for b in answer.get("limits_bytes", []))
    print(f"gpuwarden run: {answer['wid']}: rule {answer.get('rule')}, memory {limits}, "
          f"on violation {answer.get('on_violation')} ({answer.get('mode')})",
          file=sys.stderr, flush=True)
    env = {**os.environ, **answer["env"]}
    try:
        os.execvpe(cmd[0], cmd, env)
    except OSError as err:
        print(f"gpuwarden run: cannot run {cmd[0]!r}: {err.strerror}", file=sys.stderr)
        return 127
    return 127  # not reached
