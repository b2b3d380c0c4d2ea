"""Multi-process scenarios on the simulated GPU judged by the medians of a few runs."""

from __future__ import annotations

import statistics

ROUNDS = 3  # runs of a multi-process scenario whose measures are judged by their medians


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each measure's median over the runs of one scenario.  A loaded 2-core machine sometimes
    stalls a run's processes for a good part of a second (whole-suite CI runs: a paced container
    at 0.64 for 0.70 +- 0.05, one passing alone every time), which no limiter can make up; a
    fault of the limiter shows in most runs, and so in the median."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}
