"""95% intervals for judged numbers, and the three-way decision made on them.

Why one module: a number that decides a verdict must say how sure it is, and every place that
judges (the eval accuracy check, the media evals, timing certification) must compute and read
intervals the same way. Each function returns an ``Interval`` that names its method, so a record
can say how its interval was made.

Decision rule (``decide``): **pass** when the whole interval clears the target, **fail** when the
whole interval misses it, **inconclusive** when the target lies inside the interval, i.e. the
samples cannot tell. A decision is never made on the point value alone.

Stdlib only (client venvs import it as is).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054

PASS, FAIL, INCONCLUSIVE, WAIVED = "pass", "fail", "inconclusive", "waived"
DECISIONS = (PASS, FAIL, INCONCLUSIVE, WAIVED)

METHOD_STDERR = "normal: value ± 1.96 × the tool's standard error"
METHOD_WILSON = "Wilson score interval of a rate"
METHOD_BOOTSTRAP = "percentile bootstrap over items"
METHOD_BOOTSTRAP_TWO_SAMPLE = "percentile bootstrap, each run's requests resampled on their own"
METHOD_ORDER_STATISTIC = "distribution-free order-statistic interval of a quantile"
METHOD_EXACT = "exact: every item of a fixed set is checked; no wider population is estimated"
METHOD_WILSON_ZERO = ("Wilson score interval of a rate (shown); against an allowance of 0 the rule is exact over "
                      "this run's items: one bad item fails, none passes (no sample can bound a rate at 0)")


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str

    def as_list(self, digits: int = 6) -> list[float]:
        return [round(self.low, digits), round(self.high, digits)]

    def half_width(self) -> float:
        return (self.high - self.low) / 2


def exact(value: float) -> Interval:
    """A zero-width interval for a claim about a fixed set of items, not an estimate (e.g. 'both
    photos are classified right'): there is no sampling, so nothing to be unsure about."""
    return Interval(value, value, METHOD_EXACT)


def from_stderr(value: float, stderr: float, lower: float = 0.0, upper: float = 1.0) -> Interval:
    """A score's interval from its standard error, clipped to the score's range."""
    return Interval(max(lower, value - Z95 * stderr), min(upper, value + Z95 * stderr), METHOD_STDERR)


def wilson(successes: float, n: int) -> Interval:
    """Wilson score interval for ``successes`` of ``n``: honest at small n and at 0% / 100%, where
    the normal approximation collapses to a zero-width interval."""
    if n <= 0:
        return Interval(0.0, 1.0, METHOD_WILSON)
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(max(0.0, centre - half), min(1.0, centre + half), METHOD_WILSON)


def bootstrap_ratio(numerators: Sequence[float], denominators: Sequence[float], *,
                    iterations: int = 4000, seed: int = 0) -> Interval:
    """Percentile bootstrap of sum(numerators) / sum(denominators), resampling whole items.

    Why items, not units: the words of one sentence (or the tokens of one request) are not
    independent; resampling sentences keeps that correlation, so three sentences give the wide
    interval they deserve. Seeded: the same samples always give the same interval.
    """
    n = len(numerators)
    if n == 0 or n != len(denominators):
        raise ValueError("bootstrap needs one numerator and one denominator per item")
    if n < 2:
        # resampling one item always gives that item: a zero-width interval that claims certainty
        raise ValueError("a bootstrap needs at least 2 items: one item cannot show its own spread")
    rng = random.Random(seed)
    stats = []
    for _ in range(iterations):
        picks = [rng.randrange(n) for _ in range(n)]
        den = sum(denominators[i] for i in picks)
        if den > 0:
            stats.append(sum(numerators[i] for i in picks) / den)
    stats.sort()
    if not stats:
        raise ValueError("bootstrap: every resample had a zero denominator")
    lo = stats[int(0.025 * (len(stats) - 1))]
    hi = stats[int(math.ceil(0.975 * (len(stats) - 1)))]
    return Interval(lo, hi, METHOD_BOOTSTRAP)


def bootstrap_ratio_of_means(values: Sequence[float], baseline: Sequence[float], *,
                             iterations: int = 2000, seed: int = 0) -> Interval:
    """Percentile bootstrap of mean(values) / mean(baseline) for two independent samples.

    Why not ``bootstrap_ratio``: that one resamples paired items (a sentence's errors and its
    words); two runs' requests are not paired, so each sample is resampled on its own, keeping each
    run's own spread. Seeded: the same samples always give the same interval.
    """
    if not values or not baseline:
        raise ValueError("bootstrap needs requests from both runs")
    rng = random.Random(seed)
    n, m = len(values), len(baseline)
    stats = []
    for _ in range(iterations):
        den = sum(baseline[rng.randrange(m)] for _ in range(m)) / m
        if den > 0:
            stats.append((sum(values[rng.randrange(n)] for _ in range(n)) / n) / den)
    if not stats:
        raise ValueError("bootstrap: every resample of the baseline had a zero mean")
    stats.sort()
    lo = stats[int(0.025 * (len(stats) - 1))]
    hi = stats[int(math.ceil(0.975 * (len(stats) - 1)))]
    return Interval(lo, hi, METHOD_BOOTSTRAP_TWO_SAMPLE)


def _binomial_cdfs(n: int, p: float) -> list[float]:
    """[P(B <= i) for i in 0..n], B ~ Binomial(n, p), from log-space pmfs (stable for large n)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    log_n1 = math.lgamma(n + 1)
    out, total = [], 0.0
    for i in range(n + 1):
        total += math.exp(log_n1 - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        out.append(min(1.0, total))
    return out


def percentile(values: Sequence[float], pct: float) -> float | None:
    """The ``pct`` percentile (0..100) of ``values``; None for no values.

    The project's one definition, so a p99 means the same in every record: linear interpolation
    between order statistics (numpy's default, Hyndman-Fan type 7). With few samples this is a
    point estimate only; ``quantile_interval`` says how far it can be trusted.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * min(max(pct, 0.0), 100.0) / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def quantile_interval(samples: Sequence[float], q: float, tail: float = 0.025) -> Interval | None:
    """Distribution-free 95% interval of the ``q`` quantile (0 < q < 1) from order statistics.

    With B ~ Binomial(n, q) counting samples below the true quantile, the j-th and k-th smallest
    samples bracket it with probability P(j <= B < k); j is the largest and k the smallest index
    that keep each tail at 2.5%. None when the sample is too small to bound the quantile on both
    sides (a p99 from fewer than ~370 samples has no upper bound), which a caller must treat as
    inconclusive. ``tail``: the miss allowed on each side; a caller that combines two intervals
    into one 95% statement passes 0.0125 (each interval then misses with at most 2.5%, both
    together with at most 5%).
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0 or not 0 < q < 1 or not 0 < tail < 0.5:
        return None
    cdf = _binomial_cdfs(n, q)
    lower = [j for j in range(1, n + 1) if cdf[j - 1] <= tail]       # P(B < j) <= tail
    upper = [k for k in range(1, n + 1) if 1 - cdf[k - 1] <= tail]   # P(B >= k) <= tail
    if not lower or not upper:
        return None
    return Interval(xs[max(lower) - 1], xs[min(upper) - 1], METHOD_ORDER_STATISTIC)


def decide_share(count: int, n: int, allowed: float) -> tuple[str, Interval]:
    """A share that may be at most ``allowed`` (failed requests, answers that changed in a batch), decided on
    its Wilson interval: pass when the whole interval is at or below the allowance, fail when wholly above.

    Why an allowance of 0 is special: no sample can show a rate of exactly 0 (the interval's high end is
    above 0 for every n), so such a rule would never pass; it is a rule about this run's items instead --
    one bad item fails (the interval's low end is then above 0 too), none passes -- and the interval it
    returns says so in its method. ``n`` 0: nothing to decide (inconclusive)."""
    interval = wilson(count, n)
    if n <= 0:
        return INCONCLUSIVE, interval
    if allowed <= 0:
        return (FAIL if count > 0 else PASS), Interval(interval.low, interval.high, METHOD_WILSON_ZERO)
    return decide(interval, allowed, higher_is_better=False), interval


def decide(interval: Interval | None, target: float, higher_is_better: bool) -> str:
    """pass / fail / inconclusive of an interval against a target (see the module docstring).

    A value exactly on the target meets it (a tiny epsilon keeps float rounding from deciding).
    ``interval`` None means the samples could not bound the value: inconclusive.
    """
    if interval is None:
        return INCONCLUSIVE
    eps = 1e-9
    if higher_is_better:
        if interval.low >= target - eps:
            return PASS
        if interval.high < target - eps:
            return FAIL
    else:
        if interval.high <= target + eps:
            return PASS
        if interval.low > target + eps:
            return FAIL
    return INCONCLUSIVE
