"""Drift of a timed (endurance) load, decided on 95% intervals (stdlib only).

Two questions, each answered pass / fail / inconclusive (``contracts.intervals.decide``):

* **Latency**: did the p99 end-to-end latency of the last time slice rise more than the limit
  (default 20%) above the first slice's? The warm-up (``warmup_s``: one window or a tenth of the
  run, whichever is longer) is left out, the rest is cut into ``SLICES`` equal slices by
  completion time, and each slice's p99 gets its distribution-free order-statistic interval. The
  drift's interval runs from (last low / first high - 1) to (last high / first low - 1): pass when
  all of it is under the limit, fail when all of it is over. A p99 needs a few hundred samples
  per slice to be bounded at all; with fewer the check is inconclusive and says how many it had.
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

SLICES = 4
WARMUP_FRACTION = 0.1
METHOD_DRIFT = "from the first and last slices' order-statistic 95% intervals of the p99"
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
    first_p99_ms: float | None = None
    last_p99_ms: float | None = None
    drift_pct: float | None = None
    ci_pct: list[float] | None = None
    decision: str = INCONCLUSIVE
    detail: str = ""
    slices: list[dict] = field(default_factory=list)   # every slice: t_start, t_end, n, p50/p95/p99 ms


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


def latency_drift(records: list[RequestRecord], duration_s: float, window_s: float, limit_pct: float) -> LatencyDrift:
    """p99 end-to-end latency of the last slice against the first, after warm-up (see the module doc)."""
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
    out.slice_s = round(span / SLICES, 3)
    buckets: list[list[float]] = [[] for _ in range(SLICES)]
    for t, ms in ends:
        if t >= out.warmup_s:
            buckets[min(SLICES - 1, int((t - out.warmup_s) / out.slice_s))].append(ms)
    for k, values in enumerate(buckets):
        out.slices.append({"t_start_s": round(out.warmup_s + k * out.slice_s, 2),
                           "t_end_s": round(out.warmup_s + (k + 1) * out.slice_s, 2), "n": len(values),
                           "p50_ms": _ms(values, 50), "p95_ms": _ms(values, 95), "p99_ms": _ms(values, 99)})
    first, last = buckets[0], buckets[-1]
    out.first_n, out.last_n = len(first), len(last)
    out.first_p99_ms, out.last_p99_ms = _ms(first, 99), _ms(last, 99)
    if out.first_p99_ms and out.last_p99_ms is not None:
        out.drift_pct = round((out.last_p99_ms / out.first_p99_ms - 1) * 100.0, 2)
    a, b = quantile_interval(first, 0.99), quantile_interval(last, 0.99)
    if a is None or b is None or a.low <= 0:
        out.detail = (f"p99 drift {_fmt(out.drift_pct)}%: inconclusive, {out.first_n} and {out.last_n} requests in the "
                      f"first and last slices cannot bound a p99 (a few hundred per slice can; run longer)")
        return out
    ci = Interval((b.low / a.high - 1) * 100.0, (b.high / a.low - 1) * 100.0, METHOD_DRIFT)
    out.ci_pct = ci.as_list(2)
    out.decision = decide(ci, limit_pct, higher_is_better=False)
    out.detail = (f"p99 drift {_fmt(out.drift_pct)}% (95% interval {ci.low:.1f}..{ci.high:.1f}%, n {out.first_n}/"
                  f"{out.last_n}) against < {limit_pct:g}%: {out.decision}")
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


__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "LatencyDrift", "MemoryDrift", "latency_drift", "memory_drift",
           "warmup_seconds", "t975"]
