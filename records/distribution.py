"""``Distribution``: the one summary of a per-request latency metric (stdlib only).

Why one record: the report's plots and the stress tests' load points both summarise per-request
latencies; two records with different percentile sets and names (``p5`` here, ``p05`` there) meant
two meanings of "the 5th percentile" in one report. Every summary is made by ``summarise``, with
the project's one percentile definition (``contracts.intervals.percentile``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contracts.intervals import percentile
from contracts.typed_record import TypedRecord, described

#: Percentiles every summary carries (their fields are ``p<q>``).
PERCENTILES = (5, 25, 50, 75, 95, 99)
#: Bins of the histogram a summary keeps for the report's plots.
HIST_BINS = 12


@dataclass
class Distribution(TypedRecord):
    """Summary of a per-request metric; enough to draw a box plot and a histogram without
    copying every request into the record."""

    source: str = described("requests (the per-request values) or metrics (the point's percentiles only).",
                            "requests")
    count: int | None = described("Requests summarised.", None)
    min: float | None = described("Smallest value", None, unit="ms")
    p5: float | None = described("5th percentile", None, unit="ms")
    p25: float | None = described("25th percentile", None, unit="ms")
    p50: float | None = described("Median", None, unit="ms")
    p75: float | None = described("75th percentile", None, unit="ms")
    p95: float | None = described("95th percentile", None, unit="ms")
    p99: float | None = described("99th percentile", None, unit="ms")
    max: float | None = described("Largest value", None, unit="ms")
    mean: float | None = described("Mean", None, unit="ms")
    hist_edges: list[float] = described("Histogram bin edges (ms).", factory=list)
    hist_counts: list[int] = described("Requests per histogram bin.", factory=list)


def summarise(values_ms: Sequence[float], source: str = "requests", histogram: bool = True) -> Distribution:
    """The distribution of ``values_ms`` (count 0 and nothing else when there are none)."""
    if not values_ms:
        return Distribution(source=source, count=0)
    vals = sorted(values_ms)

    def r(x: float) -> float:
        return round(x, 3)  # keep the JSON readable

    out = Distribution(source=source, count=len(vals), min=r(vals[0]), max=r(vals[-1]),
                       mean=r(sum(vals) / len(vals)))
    for q in PERCENTILES:
        setattr(out, f"p{q}", r(percentile(vals, q) or 0.0))  # never None: vals is not empty
    if histogram:
        lo, hi = vals[0], vals[-1]
        width = (hi - lo) / HIST_BINS
        if width <= 0:
            out.hist_edges, out.hist_counts = [r(lo), r(hi)], [len(vals)]
        else:
            counts = [0] * HIST_BINS
            for v in vals:
                counts[min(int((v - lo) / width), HIST_BINS - 1)] += 1
            out.hist_edges, out.hist_counts = [r(lo + i * width) for i in range(HIST_BINS + 1)], counts
    return out
