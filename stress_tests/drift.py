"""Drift of a timed (endurance) load, decided on 95% intervals (stdlib only).

Two questions, each answered pass / fail / inconclusive (``contracts.intervals.decide``):

* **Latency**: did the end-to-end latency of the last time slice rise more than the limit
  (default 20%) above the first slice's? The warm-up (``warmup_s``: one window or a tenth of the
  run, whichever is longer) is left out and the rest is cut into equal slices by completion time.
  What is compared depends on how many requests the slices hold, chosen from their counts alone
  (never from their latencies, so the choice cannot be steered towards a verdict):

  - **a tail percentile**, the highest of p99, p95, p90 that the slices hold enough requests for,
    over 4, 3 or 2 slices (most first): "enough" is ``MIN_ABOVE`` (10) requests per slice expected
    above it (n x (1 - q) >= 10: 1000 for a p99, 100 for a p90). Each slice's percentile gets its
    distribution-free order-statistic interval at 97.5%, so both hold together with at least 95%
    (Bonferroni); the drift's interval runs from (last low / first high - 1) to (last high /
    first low - 1). The bare minimum for such a bound is about 4.4 requests above the percentile;
    then the interval's upper end is the slice's slowest request and one stray slow request (a
    pause, a neighbour's load) decides the check; with 10 the end sits a few requests inside. The
    tail comes first because that is where a growing queue or a leak shows first.
  - else **the geometric mean** of the first and last halves (``MIN_HALF`` = 10 requests each):
    the ratio of the halves' geometric means, its 95% interval from Welch's t on the log latencies. A
    one-minute run at a media server's concurrency holds tens of requests, too few for any tail percentile;
    for its centre the mean of log latencies is the efficient estimate. Why not the median with its
    order-statistic interval: at 15 to 27 requests per half that interval spans about the 20th to 75th
    percentile of each half, so with latencies spread as a loaded 2-core machine spreads them (sd of log
    latency 0.25) it decided 1 to 9% of steady simulated runs, the geometric mean 45 to 75% (the tests re-run
    the 27-request case). Why not a bootstrap of the mean ratio: a percentile bootstrap of 15 skewed latencies
    under-covers, and the arithmetic mean moves with one slow request far more than the mean of logs does.
    Welch's t assumes roughly normal log latencies (or enough requests for their mean to be); at the 20% limit
    exactly it was wrong (pass or fail) in 5% of simulated runs, as a 95% interval should be. Halves, not more
    slices: the fewest requests gain most from the narrowest interval, and a steady rise still shows as half
    of itself.

  pass when all of the drift's interval is under the limit, fail when all of it is over,
  inconclusive otherwise or when a half holds fewer than 10 requests (the detail says how many).
  The record names what was judged (``Drift.latency_statistic``) and over which slices.
* **Memory**: did the server's memory grow more than the limit (default 10%) after warm-up (the
  latency's, or 20 s, at most a third of the run: a fresh server's first requests allocate its working
  memory)? The samples after warm-up get a least-squares line; growth is its rise over the span
  relative to the first sample, and its interval comes from the slope's standard error (Student t, 95%). A flat
  but noisy series is a pass once the interval is narrow enough; a steady leak is a fail even when
  each step is small.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from benchmarking.metrics import RequestRecord
from contracts.intervals import FAIL, INCONCLUSIVE, PASS, Interval, decide, percentile, quantile_interval
from stress_tests.saturation import fit_slope

SLICE_COUNTS = (4, 3, 2)          # slices after warm-up for a tail percentile, most first (see the module doc)
PERCENTILES = (99, 95, 90)        # judged: the highest the compared slices hold enough requests for
MIN_ABOVE = 10                    # requests per slice expected above the judged percentile
SLICE_TAIL = 0.0125               # each slice's interval misses on a side with at most 1.25%: both hold >= 95%
GMEAN = "geometric mean"          # judged when no tail percentile can be: first vs last half
MIN_HALF = 10                     # requests per half for the geometric mean
WARMUP_FRACTION = 0.1
#: A fresh server's first requests allocate its working memory: a whisper-tiny.en server's RSS rose from 615
#: to about 800 MB over the first 16 s of a one-minute run at concurrency 2, then held (greedy or beam-5
#: decoding alike). Judged from 6 s on (a tenth of the run), that ramp read as 6-12% growth. So memory is
#: judged after at least this long, or a third of a shorter run.
MIN_MEMORY_WARMUP_S = 20.0
METHOD_DRIFT = ("from the first and last slices' order-statistic intervals of the judged percentile, "
                "each at 97.5% (together >= 95%)")
METHOD_GMEAN = "ratio of the halves' geometric means, Welch's t on log latency (95%)"
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
    statistic: str | None = None           # p99 / p95 / p90 / GMEAN; None: the slices hold too few for any
    first_ms: float | None = None          # the judged statistic in the first and last slices
    last_ms: float | None = None
    drift_pct: float | None = None         # of the judged statistic
    ci_pct: list[float] | None = None
    decision: str = INCONCLUSIVE
    detail: str = ""
    slices: list[dict] = field(default_factory=list)   # every slice: t_start, t_end, n, gmean, p50..p99 ms


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


def memory_warmup_seconds(duration_s: float, window_s: float) -> float:
    """The latency's warm-up, or ``MIN_MEMORY_WARMUP_S`` (at most a third of the run) if that is longer."""
    return round(max(warmup_seconds(duration_s, window_s), min(MIN_MEMORY_WARMUP_S, duration_s / 3)), 3)


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


def choose(counts_by_k: dict[int, tuple[int, int]]) -> tuple[str, int] | None:
    """(statistic, slices) to judge from the first and last slices' request counts per slice count
    (never from latencies): ("p99", 4) ... ("p90", 2), else (GMEAN, 2); None when a half holds
    fewer than ``MIN_HALF``."""
    for q in PERCENTILES:
        for k in SLICE_COUNTS:
            if k in counts_by_k and min(counts_by_k[k]) * (1 - q / 100.0) >= MIN_ABOVE - 1e-9:
                return f"p{q}", k
    if 2 in counts_by_k and min(counts_by_k[2]) >= MIN_HALF:
        return GMEAN, 2
    return None


def gmean_ratio_interval(first: list[float], last: list[float]) -> tuple[float, Interval] | None:
    """(ratio, 95% interval) of geometric mean(last) / geometric mean(first), Welch's t on the log
    latencies (df Welch-Satterthwaite, rounded down: wider); None with fewer than 2 per side or
    a non-positive latency."""
    if len(first) < 2 or len(last) < 2 or min(first + last) <= 0:
        return None
    la, lb = [math.log(x) for x in first], [math.log(x) for x in last]
    ma, mb = sum(la) / len(la), sum(lb) / len(lb)
    va = sum((x - ma) ** 2 for x in la) / (len(la) - 1) / len(la)
    vb = sum((x - mb) ** 2 for x in lb) / (len(lb) - 1) / len(lb)
    se = math.sqrt(va + vb)
    if se == 0:
        return math.exp(mb - ma), Interval(math.exp(mb - ma), math.exp(mb - ma), METHOD_GMEAN)
    df = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    half = t975(int(df)) * se
    return math.exp(mb - ma), Interval(math.exp(mb - ma - half), math.exp(mb - ma + half), METHOD_GMEAN)


def _gmean(values: list[float]) -> float | None:
    if not values or min(values) <= 0:
        return None
    return round(math.exp(sum(math.log(x) for x in values) / len(values)), 3)


def _pct_change(first: float | None, last: float | None) -> float | None:
    return round((last / first - 1) * 100.0, 2) if first and last is not None else None


def latency_drift(records: list[RequestRecord], duration_s: float, window_s: float, limit_pct: float) -> LatencyDrift:
    """Latency of the last slice against the first, after warm-up, on the highest tail percentile the
    slices hold enough requests for, else on the halves' geometric means (see the module doc)."""
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
    k = picked[1] if picked else 2
    buckets = cuts[k]
    out.slice_s = round(span / k, 3)
    for i, values in enumerate(buckets):
        out.slices.append({"t_start_s": round(out.warmup_s + i * out.slice_s, 2),
                           "t_end_s": round(out.warmup_s + (i + 1) * out.slice_s, 2), "n": len(values),
                           "gmean_ms": _gmean(values), **{f"p{q}_ms": _ms(values, q) for q in (50, 90, 95, 99)}})
    first, last = buckets[0], buckets[-1]
    out.first_n, out.last_n = len(first), len(last)
    out.first_p99_ms, out.last_p99_ms = _ms(first, 99), _ms(last, 99)
    out.p99_drift_pct = _pct_change(out.first_p99_ms, out.last_p99_ms)
    if picked is None:
        shown = _pct_change(_gmean(first), _gmean(last))   # in the detail only: no judged figure is claimed
        out.detail = (f"latency drift inconclusive: {out.first_n} and {out.last_n} requests in the first and last "
                      f"halves after warm-up are too few to judge even their {GMEAN}s ({MIN_HALF} per half; run "
                      f"longer); {GMEAN} drift {_fmt(shown)}% not judged")
        return out
    out.statistic = picked[0]
    where = f"{out.statistic}, first vs last of {k} slices of {out.slice_s:.3g} s"
    if out.statistic == GMEAN:
        out.first_ms, out.last_ms = _gmean(first), _gmean(last)
        ratio = gmean_ratio_interval(first, last)
        ci = None if ratio is None else Interval((ratio[1].low - 1) * 100.0, (ratio[1].high - 1) * 100.0,
                                                 METHOD_GMEAN)
    else:
        q = int(out.statistic[1:])
        out.first_ms, out.last_ms = _ms(first, q), _ms(last, q)
        a, b = quantile_interval(first, q / 100.0, SLICE_TAIL), quantile_interval(last, q / 100.0, SLICE_TAIL)
        ci = (None if a is None or b is None or a.low <= 0 else
              Interval((b.low / a.high - 1) * 100.0, (b.high / a.low - 1) * 100.0, METHOD_DRIFT))
    out.drift_pct = _pct_change(out.first_ms, out.last_ms)
    if ci is None:
        out.detail = f"latency {where}: drift {_fmt(out.drift_pct)}% inconclusive, the slices cannot bound it"
        return out
    out.ci_pct = ci.as_list(2)
    out.decision = decide(ci, limit_pct, higher_is_better=False)
    out.detail = (f"latency {where}: drift {_fmt(out.drift_pct)}% (95% interval {ci.low:.1f}..{ci.high:.1f}%, n "
                  f"{out.first_n}/{out.last_n}) against < {limit_pct:g}%: {out.decision}")
    return out


def memory_drift(samples: list[tuple[float, float]], duration_s: float, window_s: float,
                 limit_pct: float) -> MemoryDrift:
    """``samples``: (seconds into the load, bytes). Growth after the memory's warm-up
    (``memory_warmup_seconds``), decided on its interval."""
    out = MemoryDrift(memory_warmup_seconds(duration_s, window_s))
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


__all__ = ["FAIL", "GMEAN", "INCONCLUSIVE", "PASS", "LatencyDrift", "MemoryDrift", "choose", "gmean_ratio_interval",
           "latency_drift", "memory_drift", "memory_warmup_seconds", "warmup_seconds", "t975"]
