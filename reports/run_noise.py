"""Run-level noise: how far a metric's per-run mean moves between healthy runs of one build on one host,
known from one baseline run.

Why: the requests of one run share that run's host state (CPU clocks and caches, neighbours, how the engine
batched them), so their spread cannot tell the build from the run: five smoke releases of one build on a
2-core host had mean per-request output tokens/s of 9.4 to 11.2 while each run's request bootstrap was 1-2%
wide. The gate needs the spread of a run's *level*. It is known from three sources, in this order of trust:

* ``setup runs``: the SD of the log per-run means of the accepted runs of this spec measured alike on this host
  (``MIN_RUNS`` or more, the baseline among them; the newest ``NOISE_RUNS``);
* ``host class``: the same spread pooled over every accepted run on this host (any spec, any setup: each
  group of runs measured alike contributes its runs - 1 degrees of freedom), read from the run history's
  indexed metrics, once the pool has ``MIN_HOST_DF`` degrees of freedom;
* ``within-run blocks``: each point's requests cut, in the order they were sent, into blocks of at least
  one batch (``block_size``); the SD of the blocks' log means, pooled over every point of both runs, is the
  host's drift within the runs (batch means: a block's mean carries its batch's shared state, so it is the
  unit that is independent of the others, as a run is);
* ``prior``: where none of them is known, ``PRIOR_SD`` (8%): the log SD of the five healthy smoke releases
  above (7%), rounded up, taken as known (a normal quantile).

The level used is the largest of the known history and block estimates (a run's level moves at least as
much as the host drifts within it; the history adds what the blocks cannot see), with the degrees of freedom of
the one chosen; the prior only where nothing is known, and as a floor under the blocks where each run started
its own server and the history does not know the host yet: a fresh process's state (how it batches, its memory
layout) differs run to run in ways no block of one run sees (measured: con-4 TPOT 1.41x between two healthy
smoke releases of one build here, blocks drifting 3.5%). A server the runs attached to (``--server-url``: the
same process across runs, e.g. the stub) has no such restart effect. Two runs' log ratio has
variance ``2 s^2`` from the levels plus the requests' own sampling variance (read off their bootstrap), so
the 95% interval is ``log r ± t(df) × √(2 s^2 + se^2)``, hulled with the requests' bootstrap interval.
The error rates of the decision made on it are measured by simulation (``tests/reports/test_run_noise.py``,
``scripts/simulate_regression_gate.py``). Stdlib only.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from statistics import mean, variance
from typing import Sequence

from contracts.intervals import Z95, bootstrap_ratio_of_means
from contracts.sequential import student_t_equivalent
from records.regression import edge_distance

#: Fewest accepted runs of this setup (the baseline included) whose spread estimates the run-level noise.
MIN_RUNS = 3
#: Most runs of this setup read for the estimate, newest first: a host's noise changes slowly.
NOISE_RUNS = 10
#: Fewest pooled degrees of freedom of the host class (runs measured alike on this host, any spec).
MIN_HOST_DF = 2
#: Most recent accepted runs of the host read for its class level.
HOST_RUNS = 60
#: Fewest pooled degrees of freedom of the within-run blocks.
MIN_BLOCK_DF = 2
#: Most blocks one point is cut into (more blocks: more degrees of freedom, but each a shorter span).
MAX_BLOCKS = 8
#: The run-level SD assumed where nothing is known (module docstring).
PRIOR_SD = 0.08
SOURCES = ("setup runs", "host class", "within-run blocks", "prior")
METHOD = ("log ratio ± t(df) × √(2 × run-level SD² + requests' SE²), run-level SD from {source} ({detail}); "
          "hulled with a bootstrap over both runs' requests")


@dataclass(frozen=True)
class NoiseLevel:
    """The SD of one run's log level for a metric, where it came from, and its degrees of freedom."""

    source: str          # one of SOURCES
    sd: float
    df: int | None       # None: taken as known (the prior)
    detail: str
    runs: int = 0        # runs behind a history estimate (0 for blocks and the prior)


@dataclass(frozen=True)
class RatioInterval:
    """A ratio's 95% interval, how it was made, and the pieces that say how much more data would decide."""

    low: float
    high: float
    method: str
    level: NoiseLevel
    ratio: float


def block_size(concurrency: int) -> int:
    """Requests per block: at least one batch (the requests of one batch share its speed) and at least 2."""
    return max(2, int(concurrency))


@dataclass(frozen=True)
class BlockStats:
    """One point of one run cut into consecutive blocks: the blocks' log means and the spread of the log
    values inside the blocks (sum of squares and its degrees of freedom)."""

    means: list[float]
    within_ss: float
    within_df: int
    size: float          # mean requests per block


@dataclass(frozen=True)
class WithinRun:
    """Every point of both runs' blocks, pooled for one metric kind (one-way random-effects ANOVA)."""

    between_var: float   # variance of a block's log mean (request noise / size + the drift between blocks)
    drift_sd: float      # the drift's share: sqrt(max(0, between - within / size))
    df: int              # sum over point runs of blocks - 1


def block_stats(values: Sequence[float], concurrency: int) -> BlockStats | None:
    """``values`` (in the order they were sent) cut into consecutive blocks of at least ``block_size``
    requests, at most ``MAX_BLOCKS`` (the last block takes the remainder); None below 2 blocks or with a
    value that is not positive."""
    count = min(MAX_BLOCKS, len(values) // block_size(concurrency))
    if count < 2 or min(values) <= 0:
        return None
    size = len(values) // count
    means, ss, df = [], 0.0, 0
    for index in range(count):
        logs = [math.log(v) for v in values[index * size: len(values) if index == count - 1 else (index + 1) * size]]
        means.append(mean(logs))
        ss += sum((x - means[-1]) ** 2 for x in logs)
        df += len(logs) - 1
    return BlockStats(means, ss, df, len(values) / count)


def within_run(stats: Sequence[BlockStats | None]) -> WithinRun | None:
    """The pooled between-block and within-block spreads of every point run of a metric kind, and the drift
    between blocks that the requests' own spread does not explain; None below ``MIN_BLOCK_DF``."""
    used = [s for s in stats if s is not None]
    df = sum(len(s.means) - 1 for s in used)
    if df < MIN_BLOCK_DF:
        return None
    between = sum(variance(s.means) * (len(s.means) - 1) for s in used) / df
    within_df = sum(s.within_df for s in used)
    within = sum(s.within_ss for s in used) / within_df if within_df else 0.0
    size = sum(s.size for s in used) / len(used)
    return WithinRun(between, math.sqrt(max(0.0, between - within / size)), df)


def block_level(within: WithinRun | None) -> NoiseLevel | None:
    """The run-level noise the blocks show: the drift between blocks (a run's level moves at least that much)."""
    if within is None:
        return None
    return NoiseLevel("within-run blocks", within.drift_sd, within.df,
                      f"drift between blocks of both runs, {within.df} degrees of freedom")


def pooled_level(groups: Sequence[Sequence[float]], source: str, detail: str, min_df: int,
                 runs: int = 0) -> NoiseLevel | None:
    """The pooled SD of log values over groups (each group's own mean removed; a group of k gives k - 1
    degrees of freedom), or None below ``min_df``."""
    squares, df = 0.0, 0
    for group in groups:
        if len(group) >= 2:
            squares += variance(group) * (len(group) - 1)
            df += len(group) - 1
    if df < min_df:
        return None
    return NoiseLevel(source, math.sqrt(squares / df), df, detail, runs)


def setup_level(run_means: Sequence[float]) -> NoiseLevel | None:
    """The spread of the accepted runs of this setup (``MIN_RUNS`` or more positive means), or None."""
    logs = [math.log(m) for m in run_means if m > 0]
    if len(logs) < MIN_RUNS:
        return None
    return pooled_level([logs], "setup runs", f"{len(logs)} accepted runs of this setup", 1, len(logs))


def choose_level(history: NoiseLevel | None, blocks: NoiseLevel | None, restarted: bool = False) -> NoiseLevel:
    """The level the interval uses (module docstring): the larger known estimate, else the prior. ``restarted``:
    each run started its own server (local or Docker), so until the history knows this host's runs the prior is a
    floor under the blocks (a fresh process's state differs run to run in ways no block of one run can see)."""
    prior = NoiseLevel("prior", PRIOR_SD, None, f"nothing known: {PRIOR_SD:.0%} assumed")
    known = [level for level in (history, blocks) if level is not None]
    if restarted and history is None:
        known.append(dataclasses.replace(prior, detail=f"each run started its own server and the history does not "
                                                       f"know this host's runs yet: {PRIOR_SD:.0%} at least"))
    if not known:
        return prior
    return max(known, key=lambda level: level.sd)


def satterthwaite(*parts: tuple[float, int | None]) -> int | None:
    """The effective degrees of freedom of a sum of variance estimates (Welch-Satterthwaite); a part with
    None degrees of freedom is taken as known. None when every part is known (or the sum is 0)."""
    total = sum(v for v, _ in parts)
    spread = sum(v * v / df for v, df in parts if df is not None and df > 0)
    if total <= 0 or spread <= 0:
        return None
    return max(1, int(total * total / spread))


def _quantile(df: int | None) -> float:
    return Z95 if df is None else student_t_equivalent(Z95, max(1, int(df)))


def ratio_interval(values: Sequence[float], baseline: Sequence[float], level: NoiseLevel,
                   within: WithinRun | None = None, blocks: tuple[int, int] = (0, 0), *,
                   iterations: int = 2000) -> RatioInterval:
    """The interval of mean(values) / mean(baseline) (module docstring). The requests' sampling variance of the
    log ratio is the larger of their bootstrap's and the batch-means one (``within``'s block variance over
    each run's ``blocks``: requests of one block share its state, which the bootstrap cannot see). Raises
    ValueError when a run has no values or a mean is not positive."""
    boot = bootstrap_ratio_of_means(values, baseline, iterations=iterations)
    ratio = mean(values) / mean(baseline)
    if ratio <= 0 or boot.low <= 0:
        raise ValueError("the ratio of means is not positive")
    se2 = ((math.log(boot.high) - math.log(boot.low)) / (2 * Z95)) ** 2
    se_df: int | None = None
    if within is not None and min(blocks) >= 2 and within.between_var * (1 / blocks[0] + 1 / blocks[1]) > se2:
        se2, se_df = within.between_var * (1 / blocks[0] + 1 / blocks[1]), within.df
    runs2 = 2 * level.sd ** 2
    q = _quantile(satterthwaite((runs2, level.df), (se2, se_df)))
    half = q * math.sqrt(runs2 + se2)
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    method = METHOD.format(source=level.source, detail=level.detail)
    return RatioInterval(min(low, boot.low), max(high, boot.high), method, level, ratio)


def runs_to_decide(interval: RatioInterval, tolerance: float, higher_is_better: bool) -> int | None:
    """About how many runs of each build would decide an undecided ratio at the noise it saw: the interval's
    log half-width shrinks as 1/√n with n runs averaged on each side, and must come inside the distance from
    the ratio to the regression edge of the tolerance band (``1 + tolerance`` in the worse direction: below it
    the interval decides within_noise, above it regressed). None when the ratio sits on that edge (no number
    of runs decides it)."""
    gap = edge_distance(interval.ratio, tolerance, higher_is_better)
    half = max(math.log(interval.high) - math.log(interval.ratio), math.log(interval.ratio) - math.log(interval.low))
    if gap < 1e-3:
        return None
    return max(2, math.ceil((half / gap) ** 2))


__all__ = ["MIN_RUNS", "NOISE_RUNS", "MIN_HOST_DF", "HOST_RUNS", "MIN_BLOCK_DF", "MAX_BLOCKS", "PRIOR_SD",
           "SOURCES", "NoiseLevel", "RatioInterval", "BlockStats", "WithinRun", "block_size", "block_stats",
           "within_run", "pooled_level",
           "setup_level", "block_level", "choose_level", "ratio_interval", "runs_to_decide"]
