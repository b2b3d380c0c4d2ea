"""Agent benchmark (not collected by pytest): run as root on the simulated GPU (default) or on the
real GPU (--real), with the eBPF audit on.

    .venv/bin/python tests/benchmarks/bench_agent.py [--trials 30] [--workloads 100]

1. kill latency through the agent: a workload bypasses libvgpu (rule: kill after 0s) and
   allocates 64 MiB, below its limit; time from just before that allocation (CLOCK_MONOTONIC,
   printed by gpu_job) to the parent seeing the SIGKILL. Target: p99 <= 100 ms.
2. in-kernel path: the same workload allocates 2 GiB in 256 MiB steps against a 1 GiB limit;
   the crossing allocation must never return (the eBPF kill limit SIGKILLs inside it).
3. 100 workloads (each a process holding 16 MiB on the GPU under libvgpu): agent CPU over a
   window (target <= 2% of one core) and RSS (target <= 150 MB).
4. 1,000 allocations/s (5 bypassing + 5 compliant workloads, 100 alloc+free pairs/s each, audit
   mode so nobody is killed): every bypassing workload gets its verdict, no compliant one does,
   and the eBPF lost-event counter stays 0.

Prints a Markdown block for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "e2e")]

from agent_harness import TEST_POLICY, AgentProc, build_gpu_job, write_policy  # noqa: E402
from testbed import wait_for  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def env_for(real: bool, work: Path) -> dict[str, str]:
    env = dict(os.environ)
    if not real:
        from libvgpu.sim import sim_env

        env.update(sim_env(work / "sim.state", devices=1, memory="80GiB"))
    return env


def kill_latency(agent: AgentProc, job: Path,
                 trials: int) -> tuple[list[float], list[float], int]:
    """(alloc -> reaped dead, alloc -> the agent's kill action logged, trials not measured).
    On a real GPU the first includes the driver tearing the killed process's context down."""
    lat, signalled = [], []
    other = 0
    env = dict(agent.env, GPU_JOB_TRACE="1")
    wall_minus_mono = time.time() - time.monotonic()
    for i in range(trials):
        n = len(agent.events())
        p = agent.run(["--namespace", "strict", "--name", f"lat{i}"],
                      [job, "--bypass", "64", "10000"], env=env)
        assert p.stdout is not None
        line = p.stdout.readline()
        if not line.startswith("alloc_at="):
            p.kill()
            p.wait()
            other += 1
            continue
        t0 = int(line.split("=")[1])
        p.wait(30)
        t1 = time.monotonic_ns()
        if p.returncode != -9:
            other += 1
            continue
        lat.append((t1 - t0) / 1e6)
        kills = [e for e in agent.events()[n:]
                 if e.get("event") == "action" and e.get("action") == "kill"]
        if kills:
            signalled.append((kills[0]["ts"] - wall_minus_mono - t0 / 1e9) * 1e3)
        time.sleep(0.1)
    return lat, signalled, other


def in_kernel(agent: AgentProc, job: Path, trials: int) -> tuple[int, int, list[float]]:
    returned = killed_in_kernel = 0
    lat = []
    env = dict(agent.env, GPU_JOB_TRACE="1")
    for i in range(trials):
        n = len(agent.events())
        p = agent.run(["--namespace", "strict", "--name", f"cross{i}", "--gpumem", "1GiB"],
                      ["sh", "-c", f"sleep 0.5; exec {job} --bypass 2048 5000"], env=env)
        out, _ = p.communicate(timeout=60)
        t1 = time.monotonic_ns()
        if "holding" in out or p.returncode != -9:
            returned += 1
        ev = [e for e in agent.events()[n:] if e.get("action") == "kernel_kill"]
        if ev:
            killed_in_kernel += 1
        if out.startswith("alloc_at="):
            lat.append((t1 - int(out.split("\n")[0].split("=")[1])) / 1e6)
    return returned, killed_in_kernel, lat


def many_workloads(agent: AgentProc, job: Path, n: int, window: float,
                   gpumem: str) -> dict[str, float]:
    assert agent.proc is not None
    procs = []
    for i in range(n):
        procs.append(agent.run(["--namespace", "watch", "--name", f"w{i}", "--gpumem", gpumem],
                               [job, "16", str(int((window + 120) * 1000))]))
        if i % 8 == 7:
            time.sleep(0.5)
    wait_for(lambda: agent.metric("gpuwarden_workloads") == n, 120,
             f"the agent tracking the {n} workloads (gpuwarden_workloads {n})", interval=0.5,
             detail=lambda: f"gpuwarden_workloads {agent.metric('gpuwarden_workloads')}")
    # not synchronisation: the agent's rescans after admissions are due up to 5 s later (rate
    # limited, agent/daemon.py), so the CPU window starts past them, in the steady state
    time.sleep(3)
    pid = agent.proc.pid
    c0, t0 = cpu_seconds(pid), time.monotonic()
    rss = [rss_mb(pid)]
    while time.monotonic() - t0 < window:
        time.sleep(1)
        rss.append(rss_mb(pid))
    cpu = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    tracked = agent.metric("gpuwarden_workloads") or 0
    actions = [e for e in agent.events() if e.get("event") == "action"]
    if actions:  # a steady run should have none: show what they were
        kinds = collections.Counter((e.get("verdict"), e.get("action")) for e in actions)
        print(f"actions by (verdict, action): {dict(kinds)}", file=sys.stderr)
        print(f"first: {json.dumps(actions[0])[:1500]}", file=sys.stderr)
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(30)
    return {"cpu_pct": 100 * cpu, "rss_max_mb": max(rss), "tracked": tracked,
            "actions": len(actions), "loop_ms": 1000 * (agent.metric(
                "gpuwarden_agent_loop_seconds") or 0)}


def churn(agent: AgentProc, job: Path, seconds: int) -> dict[str, float]:
    assert agent.proc is not None
    n0 = len(agent.events())
    lost0 = agent.metric("gpuwarden_ebpf_lost_events_total") or 0
    bad = [agent.run(["--namespace", "watch", "--name", f"bad{i}"],
                     [job, "--bypass", "--churn", "1", "100", str(seconds)]) for i in range(5)]
    good = [agent.run(["--namespace", "watch", "--name", f"good{i}"],
                      [job, "--churn", "1", "100", str(seconds)]) for i in range(5)]
    pods = {f"{kind}{i}" for kind in ("bad", "good") for i in range(5)}
    wait_for(lambda: pods <= {e["workload"]["pod"] for e in agent.events()[n0:]
                              if e.get("event") == "workload_admitted"}, 60,
             "the agent admitting the 10 churning workloads", interval=0.2)
    pid = agent.proc.pid
    c0, t0 = cpu_seconds(pid), time.monotonic()
    outs = [p.communicate(timeout=seconds + 60)[0] for p in bad + good]
    cpu = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    pairs = sum(int(o.split("churned ")[1].split()[0]) for o in outs if "churned" in o)

    def verdicts() -> set[str]:
        return {e["workload"]["pod"] for e in agent.events()[n0:]
                if e.get("event") == "violation"}

    bad_pods = {f"bad{i}" for i in range(5)}
    with suppress(TimeoutError):  # the result counts the bypassing workloads left without one
        wait_for(lambda: bad_pods <= verdicts(), 15, "a verdict for every bypassing workload",
                 interval=0.2)
    verdicts_seen = verdicts()
    lost = (agent.metric("gpuwarden_ebpf_lost_events_total") or 0) - lost0
    return {"pairs": pairs, "seconds": seconds, "allocs_per_s": pairs / seconds,
            "bad_with_verdict": len(bad_pods & verdicts_seen),
            "good_with_verdict": len({f"good{i}" for i in range(5)} & verdicts_seen),
            "lost_events": lost, "cpu_pct": 100 * cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--workloads", type=int, default=100)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--churn-seconds", type=int, default=10)
    ap.add_argument("--real", action="store_true", help="use the real GPU, not the sim")
    ap.add_argument("--skip", action="append", default=[], choices=["latency", "kernel",
                                                                    "many", "churn"])
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    job = build_gpu_job(work)
    env = env_for(args.real, work)
    results: list[str] = []
    agent = AgentProc(work / "state", [write_policy(work / "policy")], env).start()
    try:
        if "latency" not in args.skip:
            lat, signalled, other = kill_latency(agent, job, args.trials)
            results.append(
                f"| bypass alloc -> SIGKILL through the agent (eBPF on): process reaped dead"
                f" | {len(lat)} trials ({other} not measured) | p50 {statistics.median(lat):.1f}"
                f" ms, p99 {pct(lat, 99):.1f} ms, max {max(lat):.1f} ms | p99 <= 100 ms |")
            if signalled:
                results.append(
                    f"| same trials: alloc -> the agent's kill action (signal sent) | "
                    f"{len(signalled)} trials | p50 {statistics.median(signalled):.1f} ms, p99 "
                    f"{pct(signalled, 99):.1f} ms, max {max(signalled):.1f} ms | |")
        if "kernel" not in args.skip:
            returned, kk, klat = in_kernel(agent, job, max(5, args.trials // 3))
            results.append(
                f"| crossing allocation, in-kernel kill limit | {max(5, args.trials // 3)} "
                f"trials | returned {returned}, killed in kernel {kk}; first alloc -> death "
                f"p50 {statistics.median(klat) if klat else 0:.1f} ms | never returns |")
        if "churn" not in args.skip:
            c = churn(agent, job, args.churn_seconds)
            results.append(
                f"| 1,000 allocs/s (5 bypass + 5 compliant workloads) | {c['pairs']:.0f} "
                f"alloc+free pairs in {c['seconds']} s ({c['allocs_per_s']:.0f}/s) | verdicts:"
                f" bypass {c['bad_with_verdict']}/5, compliant {c['good_with_verdict']}/5; lost "
                f"events {c['lost_events']:.0f}; agent CPU {c['cpu_pct']:.1f}% | no lost "
                "verdict |")
        if "many" not in args.skip:
            # its own agent, with the shipped examples' bypass tolerance (768 MiB): libvgpu
            # measures a context's size through NVML's first 64 processes only, so beyond 64
            # processes on one GPU a 64 MiB tolerance turns every context into a verdict
            agent.stop()
            tol = TEST_POLICY.replace("bypass_tolerance = 64MiB", "bypass_tolerance = 768MiB")
            # a GPU takes 10 workloads by default (its slices, as in a cluster)
            agent = AgentProc(work / "state-many", [write_policy(work / "policy-many", tol)],
                              env, extra=["--split-count", str(max(10, args.workloads))]
                              ).start()
            # a real CUDA context is ~500 MiB on the H200 (300 MiB on the sim): 512 MiB would
            # refuse it and the run would measure a storm of verdicts, not the steady state
            m = many_workloads(agent, job, args.workloads, args.window,
                               "1GiB" if args.real else "512MiB")
            results.append(
                f"| {args.workloads} workloads on the GPU | {m['tracked']:.0f} tracked, "
                f"{args.window:.0f} s window | agent CPU {m['cpu_pct']:.2f}% of one core, RSS "
                f"max {m['rss_max_mb']:.0f} MB, last loop {m['loop_ms']:.1f} ms, actions "
                f"{m['actions']} | CPU <= 2%, RSS <= 150 MB |")
    finally:
        agent.stop()
    cpus = os.cpu_count()
    print(f"machine: {platform.node()}, {cpus} CPUs, kernel {platform.release()}, "
          f"Python {platform.python_version()}, {'real GPU' if args.real else 'simulated GPU'}")
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print()
    print("| what | runs | result | target |")
    print("| --- | --- | --- | --- |")
    for r in results:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
