"""``PointTimeline``: a benchmark point over its own seconds, as the report carries it (stdlib only).

Why a record of its own: the report plots each point's client latency above the server's state
on one time axis, and a replayed trace's offered vs achieved rate; those series come from the
point record (``BenchPoint.server_state``, ``BenchPoint.workload``) and its request rows, and are
copied here once by the report builder so every renderer draws the same numbers. ``lines`` says
in words what the workload measured (lateness, TTFT per turn, prefix-cache hit rate).
"""
from __future__ import annotations

from dataclasses import dataclass

from contracts.typed_record import TypedRecord, described


@dataclass
class PointTimeline(TypedRecord):
    """One point over time: when each request left and how long it took, and the server's samples."""

    name: str = described("The point's file stem (point_<workload>_isl-..._n-...).")
    workload: str | None = described("trace, multi_turn, shared_prefix, or null for independent prompts.", None)
    requests: list = described(
        "[t_s, ttft_ms, e2el_ms] per measured request: seconds since the point started at which it was "
        "sent, its TTFT and end-to-end latency (null when it failed).", factory=list)
    state_t_s: list = described("Seconds since the point started of each server sample.", factory=list)
    state_series: dict = described(
        "Server state per sample (see BenchPoint.server_state): running, waiting, kv_cache_usage_pct, "
        "prefix_cache_hit_rate, queue_depth, mean_batch_size, whichever the server exposes.", factory=dict)
    rates: dict | None = described(
        "workload=trace: offered (the trace), sent and completed requests per second per time bin "
        "(BenchPoint.workload.rate_over_time).", None)
    lines: list = described("What the workload measured, in words, with n and intervals where judged.",
                            factory=list)
