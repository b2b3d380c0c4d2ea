"""Multi-process scenarios on the simulated GPU judged by the medians of a few runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROUNDS = 3  # runs of a multi-process scenario whose measures are judged by their medians


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each measure's median over the runs of one scenario.  A loaded 2-core machine sometimes
    stalls a run's processes for a good part of a second (whole-suite CI runs: a paced container
    at 0.64 for 0.70 +- 0.05, one passing alone every time), which no limiter can make up; a
    fault of the limiter shows in most runs, and so in the median."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def limit_shares(loop: Any, make_sim_gpu: Callable[[], Any], limits: tuple[int, ...], path: str,
                 grid: int, seconds: float, *, tmp: Path | None = None,
                 **env: str) -> list[dict[str, float]]:
    """ROUNDS runs of one launch_loop per limit started together, each run's shares by limit.
    With `tmp` they share one simulated GPU, each a container of its own (its region in `tmp`);
    without, each has a GPU of its own.  Every run gets a fresh node region and GPUs."""
    runs = []
    for i in range(ROUNDS):
        run, shared = loop.fresh(str(i)), make_sim_gpu().env if tmp is not None else None
        procs = {}
        for limit in limits:
            extra = dict(env, CUDA_DEVICE_SM_LIMIT=str(limit))
            if tmp is not None:
                extra["CUDA_DEVICE_MEMORY_SHARED_CACHE"] = str(tmp / f"{limit}-{i}.region")
            gpu = shared if shared is not None else make_sim_gpu().env
            procs[limit] = run.start(gpu, path, grid, seconds, **extra)
        runs.append({str(limit): float(run.result(p)["share"]) for limit, p in procs.items()})
    return runs


def pair_runs(loop: Any, make_sim_gpu: Callable[[], Any], tmp: Path,
              a: tuple[str, int, dict[str, str]], b: tuple[str, int, dict[str, str]],
              seconds: float) -> list[dict[str, float]]:
    """ROUNDS runs of two containers started together on one simulated GPU, each (name, grid,
    environment): each run's shares by name.  Every run gets a fresh node region and GPU."""
    runs = []
    for i in range(ROUNDS):
        run, gpu = loop.fresh(str(i)), make_sim_gpu().env
        procs = {name: run.start(gpu, "kernel", grid, seconds, **env,
                                 CUDA_DEVICE_MEMORY_SHARED_CACHE=str(tmp / f"{name}-{i}.region"))
                 for name, grid, env in (a, b)}
        runs.append({name: float(run.result(p)["share"]) for name, p in procs.items()})
    return runs


def compute_state(region: Path) -> Any:
    """A container region's compute state of GPU 0 (RegionError until its process created it)."""
    from libvgpu.region import Region

    with Region.open(region) as r:
        return r.compute_state(0)
