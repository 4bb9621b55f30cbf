"""Drift of a timed (endurance) load, decided on 95% intervals (stdlib only).

Two questions, each answered pass / fail / inconclusive (``contracts.intervals.decide``):

* **Latency**: did the end-to-end latency of the last time slice rise more than the limit
  (default 20%) above the first slice's? The warm-up (``warmup_s``: one window or a tenth of the
  run, whichever is longer) is left out, the rest is cut into equal slices by completion time, and
  the chosen percentile of the first and last slices gets its distribution-free order-statistic
  interval, each at 97.5% so that both hold together with at least 95% (Bonferroni). The drift's
  interval runs from (last low / first high - 1) to (last high / first low - 1): pass when all of
  it is under the limit, fail when all of it is over, inconclusive otherwise.

  Which percentile and how many slices: the p99 over 4 slices when the slices hold enough
  requests for it, else the highest percentile of p99, p95, p90, p50 that they do hold enough
  for, over 4, 3 or 2 slices (most first). "Enough" is ``MIN_ABOVE`` (10) requests per slice
  expected above the percentile (n x (1 - q) >= 10: 1000 for a p99, 20 for a median). The bare
  minimum for an order-statistic bound is about 4.4; at that size the interval's upper end is the
  slice's slowest request, so one stray slow request (a pause, a neighbour's load) decides the
  check; with 10 the end sits a few requests inside. The choice is made from the slices' request
  counts only, never from their latencies, so it cannot be steered towards a verdict. The
  percentile comes first (the tail is where a growing queue or a leak shows), the slice count
  second: fewer slices compare nearer times, so a steady rise shows as (1 - 1/slices) of itself
  (half of it between halves), which the record says by naming the slices.

  Why percentiles and not a bootstrap of the slices' mean or median ratio: the order-statistic
  interval holds its coverage at every sample size and for any latency distribution, while a
  percentile bootstrap of tens of skewed latencies under-covers, a mean is moved by one slow
  request, and a bootstrapped median jumps between a few sample values. The same method judges a
  30-minute soak's p99 and a one-minute run's median, and the record says which was judged
  (``Drift.latency_statistic``). A run too short even for a median over halves (fewer than 20
  requests in a half) stays inconclusive and says how many it had.
* **Memory**: did the server's memory grow more than the limit (default 10%) after warm-up? The
  samples after warm-up get a least-squares line; growth is its rise over the span relative to the
  first sample, and its interval comes from the slope's standard error (Student t, 95%). A flat
  but noisy series is a pass once the interval is narrow enough; a steady leak is a fail even when
  each step is small.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from benchmarking.metrics import RequestRecord
from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide, percentile, quantile_interval
from stress_tests.saturation import fit_slope

SLICE_COUNTS = (4, 3, 2)          # slices after warm-up, most first (see the module doc)
PERCENTILES = (99, 95, 90, 50)    # judged: the highest the compared slices hold enough requests for
MIN_ABOVE = 10                    # requests per slice expected above the judged percentile
SLICE_TAIL = 0.0125               # each slice's interval misses on a side with at most 1.25%: both hold >= 95%
WARMUP_FRACTION = 0.1
METHOD_DRIFT = ("from the first and last slices' order-statistic intervals of the judged percentile, "
                "each at 97.5% (together >= 95%)")
METHOD_SLOPE = "least-squares slope of the samples after warm-up, 95% Student t interval"
# Two-sided 95% Student-t critical values by degrees of freedom (normal beyond the table).
_T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t975(df: int) -> float:
    """Two-sided 95% critical value for ``df`` degrees of freedom (the next smaller tabled df: wider)."""
    if df < 1:
        return float("inf")
    return _T975[max(k for k in _T975 if k <= df)] if df < 120 else 1.96


@dataclass
class LatencyDrift:
    warmup_s: float
    slice_s: float | None = None
    first_n: int = 0
    last_n: int = 0
    first_p99_ms: float | None = None      # shown beside the judged figure, judged only as the statistic
    last_p99_ms: float | None = None
    p99_drift_pct: float | None = None
    statistic: str | None = None           # p99 / p95 / p90 / p50; None: the slices hold too few for any
    first_ms: float | None = None          # the judged statistic in the first and last slices
    last_ms: float | None = None
    drift_pct: float | None = None         # of the judged statistic
    ci_pct: list[float] | None = None
    decision: str = INCONCLUSIVE
    detail: str = ""
    slices: list[dict] = field(default_factory=list)   # every slice: t_start, t_end, n, p50/p95/p90/p99 ms


@dataclass
class MemoryDrift:
    warmup_s: float
    n: int = 0
    baseline_mb: float | None = None
    last_mb: float | None = None
    peak_mb: float | None = None
    growth_pct: float | None = None        # fitted rise over the span / baseline
    ci_pct: list[float] | None = None
    raw_growth_pct: float | None = None    # (last - baseline) / baseline, unfitted
    decision: str = INCONCLUSIVE
    detail: str = ""


def warmup_seconds(duration_s: float, window_s: float) -> float:
    return round(max(window_s, WARMUP_FRACTION * duration_s), 3)


def _ms(values: list[float], q: float) -> float | None:
    value = percentile(values, q)
    return None if value is None else round(value, 3)


def _cut(ends: list[tuple[float, float]], warmup_s: float, span: float, k: int) -> list[list[float]]:
    """Latencies (ms) of the requests that ended after warm-up, in ``k`` equal slices by end time."""
    buckets: list[list[float]] = [[] for _ in range(k)]
    for t, ms in ends:
        if t >= warmup_s:
            buckets[min(k - 1, int((t - warmup_s) / (span / k)))].append(ms)
    return buckets


def choose(first_n_by_k: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """(percentile, slices) to judge from the first and last slices' request counts per slice count
    (never from latencies); None when not even a median over halves has ``MIN_ABOVE`` above it."""
    for q in PERCENTILES:
        for k in SLICE_COUNTS:
            if k in first_n_by_k and min(first_n_by_k[k]) * (1 - q / 100.0) >= MIN_ABOVE - 1e-9:
                return q, k
    return None


def _pct_change(first: float | None, last: float | None) -> float | None:
    return round((last / first - 1) * 100.0, 2) if first and last is not None else None


def latency_drift(records: list[RequestRecord], duration_s: float, window_s: float, limit_pct: float) -> LatencyDrift:
    """Latency of the last slice against the first, after warm-up, on the highest percentile the
    slices hold enough requests for (see the module doc)."""
    out = LatencyDrift(warmup_seconds(duration_s, window_s))
    ok = [r for r in records if r.success and r.latency is not None]
    if not ok:
        out.detail = "no successful request"
        return out
    origin = min(r.send_time for r in records)
    ends = [(r.send_time - origin + r.latency, r.latency * 1000.0) for r in ok]
    span = duration_s - out.warmup_s
    if span <= 0:
        out.detail = f"the run ({duration_s:.0f} s) is no longer than its warm-up ({out.warmup_s:.0f} s)"
        return out
    cuts = {k: _cut(ends, out.warmup_s, span, k) for k in SLICE_COUNTS}
    picked = choose({k: (len(b[0]), len(b[-1])) for k, b in cuts.items()})
    k = picked[1] if picked else SLICE_COUNTS[-1]
    buckets = cuts[k]
    out.slice_s = round(span / k, 3)
    for i, values in enumerate(buckets):
        out.slices.append({"t_start_s": round(out.warmup_s + i * out.slice_s, 2),
                           "t_end_s": round(out.warmup_s + (i + 1) * out.slice_s, 2), "n": len(values),
                           **{f"p{q}_ms": _ms(values, q) for q in sorted(PERCENTILES)}})
    first, last = buckets[0], buckets[-1]
    out.first_n, out.last_n = len(first), len(last)
    out.first_p99_ms, out.last_p99_ms = _ms(first, 99), _ms(last, 99)
    out.p99_drift_pct = _pct_change(out.first_p99_ms, out.last_p99_ms)
    if picked is None:
        low = PERCENTILES[-1]
        need = int(MIN_ABOVE / (1 - low / 100.0))
        shown = _pct_change(_ms(first, low), _ms(last, low))   # in the detail only: no judged figure is claimed
        out.detail = (f"latency drift inconclusive: {out.first_n} and {out.last_n} requests in the first and last "
                      f"halves after warm-up cannot bound even a p{low} ({need} per half can; run longer); p{low} "
                      f"drift {_fmt(shown)}% not judged")
        return out
    q = picked[0]
    out.statistic = f"p{q}"
    out.first_ms, out.last_ms = _ms(first, q), _ms(last, q)
    out.drift_pct = _pct_change(out.first_ms, out.last_ms)
    a, b = quantile_interval(first, q / 100.0, SLICE_TAIL), quantile_interval(last, q / 100.0, SLICE_TAIL)
    where = f"{out.statistic}, first vs last of {k} slices of {out.slice_s:.3g} s"
    if a is None or b is None or a.low <= 0:
        out.detail = f"{where}: drift {_fmt(out.drift_pct)}% inconclusive, the slices cannot bound it"
        return out
    ci = Interval((b.low / a.high - 1) * 100.0, (b.high / a.low - 1) * 100.0, METHOD_DRIFT)
    out.ci_pct = ci.as_list(2)
    out.decision = decide(ci, limit_pct, higher_is_better=False)
    out.detail = (f"latency {where}: drift {_fmt(out.drift_pct)}% (95% interval {ci.low:.1f}..{ci.high:.1f}%, n "
                  f"{out.first_n}/{out.last_n}) against < {limit_pct:g}%: {out.decision}")
    return out


def memory_drift(samples: list[tuple[float, float]], duration_s: float, window_s: float,
                 limit_pct: float) -> MemoryDrift:
    """``samples``: (seconds into the load, bytes). Growth after warm-up, decided on its interval."""
    out = MemoryDrift(warmup_seconds(duration_s, window_s))
    after = [(t, b / 1e6) for t, b in samples if b and t >= out.warmup_s]
    out.n = len(after)
    if not after:
        out.detail = "no memory sample after warm-up"
        return out
    out.baseline_mb, out.last_mb = round(after[0][1], 2), round(after[-1][1], 2)
    out.peak_mb = round(max(v for _, v in after), 2)
    out.raw_growth_pct = round((after[-1][1] / after[0][1] - 1) * 100.0, 3)
    fit = fit_slope(after)
    if fit is None:
        out.detail = f"memory growth {out.raw_growth_pct}% from {out.n} sample(s): inconclusive, a line needs 4"
        return out
    span = after[-1][0] - after[0][0]
    half = t975(fit.n - 2) * fit.stderr
    scale = 100.0 * span / after[0][1]
    out.growth_pct = round(fit.slope * scale, 3)
    ci = Interval((fit.slope - half) * scale, (fit.slope + half) * scale, METHOD_SLOPE)
    out.ci_pct = ci.as_list(3)
    out.decision = decide(ci, limit_pct, higher_is_better=False)
    out.detail = (f"memory growth after warm-up {out.growth_pct:.2f}% (95% interval {ci.low:.2f}..{ci.high:.2f}%, "
                  f"{out.n} samples, {out.baseline_mb:.0f} -> {out.last_mb:.0f} MB) against < {limit_pct:g}%: "
                  f"{out.decision}")
    return out


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "LatencyDrift", "MemoryDrift", "choose", "latency_drift", "memory_drift",
           "warmup_seconds", "t975"]
