"""Run-to-run noise: how far a metric's per-run mean moves between healthy runs of one setup on one host.

Why: the requests of one run share that run's host state (CPU clocks and caches, neighbours, how the engine
batched them), so they are not independent samples of the build. At concurrency 4 the requests of one batch
have near-equal tokens/s: five smoke releases of one build on a 2-core host had mean per-request output
tokens/s of 9.4 to 11.2 while each run's request bootstrap was 1-2% wide, and the gate "decided" regressions
of 7-21% in healthy builds. The unit that is independent of the others is the run, so the gate's interval
is built from runs:

* ``s``: the standard deviation of the log of the metric's per-run mean over the ``k`` accepted runs of this
  spec measured alike on this host (``reports.comparison``'s ``last`` rule; the baseline among them; the
  newest ``NOISE_RUNS``), with ``k - 1`` degrees of freedom;
* two runs' log ratio has variance ``2 s^2``, so its 95% interval is ``log r ± t(k-1) × √2 × s``, Student's t
  because ``s`` comes from few runs (``contracts.sequential.student_t_equivalent``);
* the comparison's interval is the hull of that one and the requests' bootstrap interval (a run with more
  requests than its history cannot claim less spread than its own requests show).

With fewer than ``MIN_RUNS`` accepted runs there is no estimate: the metric shows its requests' interval and is
not decided (inconclusive), because a ratio outside it may be the host's run-to-run drift. The resolution this
buys is the host's: on a steady host the gate sees a few percent, on a noisy one only large changes; each
metric says its ``run_noise_pct``. The rates are checked by simulation (``tests/reports/test_run_noise.py``).
Stdlib only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import stdev
from typing import Sequence

from contracts.intervals import Z95, bootstrap_ratio_of_means
from contracts.sequential import student_t_equivalent

#: Fewest accepted runs (the baseline included) whose spread estimates the run-to-run noise: 2 degrees of freedom.
MIN_RUNS = 3
#: Most runs read for the estimate, newest first: a host's noise changes slowly, old runs add little.
NOISE_RUNS = 10
METHOD_RUNS = ("run-to-run: log ratio ± t(k-1) × √2 × SD of the log per-run means of k accepted runs, "
               "hulled with a bootstrap over both runs' requests")
METHOD_REQUESTS = "bootstrap over both runs' requests (run-to-run noise unknown: not decided)"


@dataclass(frozen=True)
class RatioInterval:
    """A ratio's 95% interval, how it was made, and whether it may decide."""

    low: float
    high: float
    method: str
    runs: int                    # runs behind the run-to-run estimate (0: none)
    run_noise: float | None      # SD of one run's log mean (about the relative SD of a run's mean)

    @property
    def may_decide(self) -> bool:
        return self.runs >= MIN_RUNS


def log_run_sd(run_means: Sequence[float]) -> float | None:
    """SD of the log of positive per-run means; None below ``MIN_RUNS`` of them."""
    logs = [math.log(m) for m in run_means if m > 0]
    return stdev(logs) if len(logs) >= MIN_RUNS else None


def ratio_interval(values: Sequence[float], baseline: Sequence[float], run_means: Sequence[float], *,
                   iterations: int = 2000) -> RatioInterval:
    """The interval of mean(values) / mean(baseline) (module docstring); ``run_means`` are the accepted runs'
    means of the metric, the baseline's among them. Raises ValueError when a run has no values."""
    boot = bootstrap_ratio_of_means(values, baseline, iterations=iterations)
    runs = sum(1 for m in run_means if m > 0)
    sd = log_run_sd(run_means)
    if sd is None:
        return RatioInterval(boot.low, boot.high, METHOD_REQUESTS, runs, None)
    ratio = (sum(values) / len(values)) / (sum(baseline) / len(baseline))
    half = student_t_equivalent(Z95, runs - 1) * math.sqrt(2.0) * sd
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    return RatioInterval(min(low, boot.low), max(high, boot.high), METHOD_RUNS, runs, sd)


__all__ = ["MIN_RUNS", "NOISE_RUNS", "METHOD_RUNS", "METHOD_REQUESTS", "RatioInterval", "log_run_sd",
           "ratio_interval"]
