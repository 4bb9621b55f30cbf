"""95% intervals of a media point's headline figures, from the point's own per-request rows.

Why: a media tier target is a judged number, so it is decided on an interval like the LLM targets
(``records.judge.target_estimates``), never on the point value alone. The rows are
``MediaPoint.requests`` (completed ones only: ``error_class`` null); ``n`` is the completed requests.
The intervals come from ``contracts.intervals`` and ``contracts.sequential`` (no statistics of its own here):

* ``s_per_step``: anytime-valid confidence sequence of the mean latency (``contracts.sequential.mean_cs``
  over batch means of one round of the point's concurrency, as the LLM targets), divided by
  ``num_inference_steps``;
* ``rtf``: the same confidence sequence of the mean of the requests' latency / audio seconds;
* ``latency_p50_ms``, ``latency_p95_ms``: the order-statistic interval of that quantile;
* ``images_per_s``, ``items_per_s``, ``audio_s_per_s`` (work / wall time of the point): percentile
  bootstrap of the work per request-second (sum of units / sum of latencies) over the requests, its
  relative spread applied to the point's figure (a closed loop's throughput is its concurrency times
  that rate).

A figure with fewer than ``MIN_DECIDING_SAMPLES`` completed requests, without the rows it needs (a
speech row without its audio seconds) or not listed above has no interval: its check is
inconclusive. Seeded: the same rows give the same interval.

Why a confidence sequence for the means: the media benchmark's adaptive stop looks at these intervals after
every round (``records.sampling``), and a fixed-n interval looked at that often decides wrongly far more
than 5% of the time (tests/records/test_sequential_error_rates.py). The throughputs and quantiles keep
their fixed-n intervals for now: a ratio of sums and an order statistic have no confidence sequence here yet.
"""
from __future__ import annotations

from collections.abc import Iterable

from contracts.intervals import METHOD_ORDER_STATISTIC, Interval, bootstrap_ratio, quantile_interval
from contracts.sequential import mean_cs
from records.judge import BOOTSTRAP_ITERATIONS, MIN_DECIDING_SAMPLES, Estimate
from records.media import SPEECH, MediaPoint

OVER = "over the point's completed requests"
SEQUENCE = (f"anytime-valid confidence sequence (normal mixture; Waudby-Smith et al. 2021) over batch means of one "
            f"round of the point's concurrency, {OVER} in completion order")
METHOD_MEAN_LATENCY = f"{SEQUENCE}, of the mean latency (s_per_step: / num_inference_steps)"
METHOD_RTF = f"{SEQUENCE}, of the mean real-time factor (latency / audio seconds)"
METHOD_THROUGHPUT = (f"percentile bootstrap {OVER} of the work per request-second (units / latency), its relative "
                     f"spread applied to the point's work / wall time")
METHOD_QUANTILE = f"{METHOD_ORDER_STATISTIC} {OVER}"
THROUGHPUTS = ("images_per_s", "items_per_s", "audio_s_per_s")
QUANTILES = {"latency_p50_ms": 0.5, "latency_p95_ms": 0.95}
#: Figures that can have an interval (with enough rows); a target on any other figure stays inconclusive.
INTERVAL_FIGURES = ("s_per_step", "rtf", *QUANTILES, *THROUGHPUTS)


def _completed(point: MediaPoint) -> list[tuple[float, float | None]]:
    """(latency ms, units) of every completed request; units from the row, else the point's items per
    request (older rows; a speech row has no fallback: its clips differ in length)."""
    fallback = None if point.kind == SPEECH else float(point.items_per_request or 1)
    out = []
    for row in point.requests:
        if not isinstance(row, dict) or row.get("error_class") is not None:
            continue
        ms, units = row.get("ms"), row.get("units", fallback)
        if isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0:
            out.append((float(ms), float(units) if isinstance(units, (int, float)) and units > 0 else None))
    return out


def _scaled(interval: Interval, by: float, method: str) -> Interval:
    return Interval(interval.low * by, interval.high * by, method)


def figure_estimates(point: MediaPoint, only: Iterable[str] | None = None) -> dict[str, Estimate]:
    """Every figure of the point that has a value (or those of ``only``: the media benchmark's adaptive
    stop asks for the figures its checks need), with its 95% interval (None when it cannot have one)."""
    wanted = None if only is None else set(only)
    rows = _completed(point)
    n = len(rows)
    latencies = [ms for ms, _ in rows]
    with_units = [(ms, u) for ms, u in rows if u is not None]
    enough = n >= MIN_DECIDING_SAMPLES
    # one batch = the requests in flight together (a point with fewer requests than its concurrency has that many)
    batch = max(1, min(int(point.max_concurrency or 1), int(point.num_requests or n) or 1))

    def mean_of(values: list[float]) -> Interval | None:
        if len(values) < MIN_DECIDING_SAMPLES:
            return None
        return mean_cs(values, batch=batch)

    out: dict[str, Estimate] = {}
    for name, value in point.figures.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if wanted is not None and name not in wanted:
            continue
        interval = None
        if name == "s_per_step":
            steps = point.params.get("num_inference_steps")
            mean = mean_of([ms / 1000.0 for ms in latencies])
            if mean is not None and isinstance(steps, (int, float)) and steps > 0:
                interval = _scaled(mean, 1.0 / steps, METHOD_MEAN_LATENCY)
        elif name == "rtf" and len(with_units) == n:
            mean = mean_of([ms / 1000.0 / u for ms, u in with_units])
            interval = None if mean is None else _scaled(mean, 1.0, METHOD_RTF)
        elif name in QUANTILES and enough:
            found = quantile_interval(latencies, QUANTILES[name])
            interval = None if found is None else _scaled(found, 1.0, METHOD_QUANTILE)
        elif name in THROUGHPUTS and enough and len(with_units) == n:
            units, seconds = [u for _, u in with_units], [ms / 1000.0 for ms, _ in with_units]
            rate = sum(units) / sum(seconds)
            spread = bootstrap_ratio(units, seconds, iterations=BOOTSTRAP_ITERATIONS)
            interval = _scaled(spread, value / rate, METHOD_THROUGHPUT)
        out[name] = Estimate(float(value), interval, n)
    return out
