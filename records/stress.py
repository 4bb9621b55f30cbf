"""Typed records of the stress_tests workflow (stdlib only): ``RUN_DIR/stress_tests/stress_record.json``
(every load point) and ``RUN_DIR/stress_tests/capacity_record.json`` (the SLO capacity search).

Both carry ``name``, ``status``, ``passed`` and ``detail``: the report lists each record as one
item and the release verdict blocks on ``passed: false``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described
from records.distribution import Distribution

@dataclass
class Drift(TypedRecord):
    """How latency and server memory moved over a timed (endurance) load, window by window."""

    latency_metric: str = described("the per-window latency compared (median end-to-end latency)", "e2el_p50_ms")
    latency_first_ms: float | None = described("median e2e latency of the first window with results", None,
                                               unit="ms")
    latency_last_ms: float | None = described("median e2e latency of the last window with results", None,
                                              unit="ms")
    latency_drift_pct: float | None = described("(last - first) / first of the window medians", None, unit="%")
    latency_slope_ms_per_h: float | None = described("least-squares slope of the window medians", None,
                                                     unit="ms/h")
    memory_source: str = described("process_tree (local RSS), docker, metrics (API process only) or none",
                                   "none")
    memory_what: str = described("what exactly was measured", "")
    memory_first_mb: float | None = described("server memory at the first sample", None, unit="MB")
    memory_last_mb: float | None = described("server memory at the last sample", None, unit="MB")
    memory_peak_mb: float | None = described("highest sample", None, unit="MB")
    memory_growth_pct: float | None = described("(last - first) / first", None, unit="%")
    memory_slope_mb_per_h: float | None = described("least-squares slope of the samples", None, unit="MB/h")
    warmup_s: float | None = described("seconds at the start left out of the latency drift (one window or "
                                       "a tenth of the run, whichever is longer)", None, unit="s")
    memory_warmup_s: float | None = described("seconds at the start left out of the memory growth: the latency's "
                                              "warm-up or 20 s (at most a third of the run), whichever is longer; "
                                              "a fresh server allocates its working memory first", None, unit="s")
    slice_s: float | None = described("length of each of the equal time slices the run after warm-up is cut into "
                                      "for the latency drift (4, 3 or 2 slices: see latency_statistic)", None,
                                      unit="s")
    slices: list[Any] = described("the slices the latency drift compared, in order: t_start_s, t_end_s, n (requests "
                             "ended in it), gmean_ms (geometric mean), p50_ms, p90_ms, p95_ms, p99_ms of end-to-end "
                             "latency", factory=list)
    latency_statistic: str | None = described(
        "what of the end-to-end latency is judged, first vs last slice: the highest of p99, p95, p90 that the "
        "slices hold enough requests for (10 per slice expected above it; over 4, 3 or 2 slices), else the "
        "geometric mean of the first and last halves (10 requests each at least); chosen from request counts "
        "only (null: too few requests for either)", None)
    latency_judged_first_ms: float | None = described("the judged statistic (latency_statistic) of the first slice "
                                                      "after warm-up", None, unit="ms")
    latency_judged_last_ms: float | None = described("the judged statistic of the last slice", None, unit="ms")
    latency_judged_drift_pct: float | None = described("(last / first - 1) of the judged statistic: the judged "
                                                       "latency drift", None, unit="%")
    latency_judged_drift_ci: list[Any] | None = described(
        "95% interval of the judged drift: for a percentile from the two slices' order-statistic intervals at "
        "97.5% each, for the geometric mean from Welch's t on log latency (null: too few requests)", None,
        unit="%")
    latency_p99_first_ms: float | None = described("p99 e2e latency of the first slice after warm-up (shown; judged "
                                                   "only when latency_statistic is p99)", None, unit="ms")
    latency_p99_last_ms: float | None = described("p99 e2e latency of the last slice", None, unit="ms")
    latency_p99_n: list[Any] = described("requests in the first and last slices (the judged statistic's sample sizes)",
                                    factory=list)
    latency_p99_drift_pct: float | None = described("(last p99 / first p99 - 1), a point value (the judged drift is "
                                                    "latency_judged_drift_pct)", None, unit="%")
    latency_p99_drift_ci: list[Any] | None = described("95% interval of the p99 drift when the p99 is the judged "
                                                  "statistic (null otherwise)", None, unit="%")
    latency_decision: str | None = described("pass / fail / inconclusive of the judged drift "
                                             "(latency_judged_drift_pct) against max_latency_drift_pct, decided on "
                                             "its interval", None)
    memory_baseline_mb: float | None = described("first memory sample after warm-up", None, unit="MB")
    memory_growth_after_warmup_pct: float | None = described(
        "memory growth after warm-up: the least-squares line's rise over the samples' span / the baseline (the "
        "judged figure)", None, unit="%")
    memory_growth_ci: list[Any] | None = described("95% interval of that growth (Student t on the slope)", None,
                                                   unit="%")
    memory_samples: int = described("memory samples after warm-up", 0)
    memory_decision: str | None = described("pass / fail / inconclusive of the growth against max_memory_growth_pct, "
                                            "decided on its interval (null: no memory source)", None)


@dataclass
class StressPointRecord(TypedRecord):
    """One stress load point and its judgement."""

    name: str = described("mode, lengths, concurrency and count (or duration) of the point")
    mode: str = described("single, multiple, custom, endurance, or workload (a benchmarks workload run as a stress "
                          "point: stress_tests/workload.py)")
    kind: str = described("text (LLM requests) or the media kind: speech, embedding, cnn, image", "text")
    isl: int = described("input tokens per request (after the context limit)", 0)
    osl: int = described("output tokens per request, forced with ignore_eos + min_tokens", 0)
    concurrency: int = described("requests in flight (closed loop)", 1)
    num_prompts: int = described("requests to send (0: until the duration ran out)", 0)
    duration_target_s: float | None = described("endurance duration asked for", None, unit="s")
    requested_isl: int | None = described("ISL asked for when the context limit rescaled it", None)
    requested_osl: int | None = described("OSL asked for when the context limit rescaled it", None)
    started: str = described("ISO 8601 UTC start", "")
    duration_s: float = described("wall time of the load", 0.0, unit="s")
    sent: int = described("requests sent", 0)
    completed: int = described("requests that succeeded", 0)
    failed: int = described("requests that failed (server or transport errors)", 0)
    stopped_early: int = described("requests cut when the point was stopped early (not errors)", 0)
    not_sent: int = described("requests never sent (point stopped or out of time)", 0)
    error_rate: float = described("failed / (sent - stopped_early)", 0.0)
    failures_by_class: dict[str, int] = described("failed requests per error class", factory=dict)
    request_throughput: float | None = described("completed requests per second", None, unit="req/s")
    items_throughput: float | None = described("media: completed items (clips, photos, texts, images) per second",
                                               None, unit="items/s")
    output_throughput: float | None = described("output tokens per second", None, unit="tok/s")
    ttft_ms: Distribution | None = described("time to first token", None, record=Distribution)
    tpot_ms: Distribution | None = described("time per output token after the first", None, record=Distribution)
    itl_ms: Distribution | None = described("gap between streamed chunks", None, record=Distribution)
    e2el_ms: Distribution | None = described("end-to-end latency", None, record=Distribution)
    saturation: dict[str, Any] | None = described("over-saturation detector: fired, reason, slopes at the last check",
                                                  None)
    stopped_reason: str | None = described("why the point stopped before its end, if it did", None)
    windows: list[Any] = described("per-window completed/failed/medians/memory of a timed load", factory=list)
    drift: Drift | None = described("latency and memory drift over a timed load", None, record=Drift)
    checks: dict[str, Any] = described("each judged check -> {value, limit, passed}; error_rate and the drift checks "
                                       "add decision, ci95 (95% interval: Wilson for the error rate, with its "
                                       "ci_method; the drift's own for drift), n and detail; passed is null when the "
                                       "check's interval cannot decide it", factory=dict)
    status: str = described("passed, failed, or inconclusive (nothing failed, a check could not be decided)",
                            "failed")
    passed: bool | None = described("every check passed (null: inconclusive)", False)
    detail: str = described("one-line summary, or what failed", "")
    requests_file: str | None = described("per-request JSONL relative to the run directory", None)
    server_state: dict[str, Any] | None = described(
        "the server's /metrics sampled about once a second during the load (contracts/server_state.py: "
        "t_s since the load started, the request rows' clock minus origin_perf_s; running, waiting, "
        "kv_cache_usage_pct, prefix_cache_hit_rate, queue_depth, mean_batch_size as exposed); null without /metrics",
        None)
    workload: dict[str, Any] | None = described(
        "mode workload: the workload's own figures, as a benchmarks point records them (BenchPoint.workload: "
        "kind trace, multi_turn or shared_prefix; lateness, TTFT per turn, prefix-cache hit rate ...); "
        "null for the other modes", None)
    tool: str | None = described("the load generator that sent the point when another tool did (tool=: aiperf, "
                                 "guidellm, vllm-bench), its per-request output judged as our client's; null: our "
                                 "own client", None)
    tool_version: str | None = described("that tool's installed version", None)
    tool_command: str | None = described("that tool's exact command line, the API key redacted", None)
    warnings: list[Any] | None = described("what the reader should know about how the point was measured (a tool's "
                                           "limits: one window over its whole run, no saturation detector)", None)
    interrupted: bool | None = described("a signal cut the load short: a rerun in the same run directory measures "
                                         "the point again (stress_tests/resume.py); null: it ran to its end", None)


@dataclass
class StressRecord(TypedRecord):
    SCHEMA = "tt-stress-record/1"

    name: str = described("one report item for every load point", "stress_load")
    model_id: str = described("model spec id of the run", "")
    server_url: str = described("base URL of the server under test", "")
    size: str = described("smoke, ci or full", "ci")
    run_modes: list[Any] = described("load modes run (capacity has its own record)", factory=list)
    started: str = described("ISO 8601 UTC start", "")
    duration_s: float = described("wall time of every point", 0.0, unit="s")
    status: str = described("passed when every point passed; inconclusive when none failed but one could not "
                            "be decided", "failed")
    passed: bool | None = described("every point passed (null: inconclusive)", False)
    detail: str = described("one-line summary", "")
    points: list[StressPointRecord] = described("every load point", factory=list, record_list=StressPointRecord)


@dataclass
class CapacityLevel(TypedRecord):
    """One measured level of the capacity search (a point of the curve)."""

    level: float = described("concurrency, or request rate (req/s)")
    holds: bool = described("every SLO percentile within its limit and the whole 95% Wilson interval of goodput "
                            ">= the goal")
    marginal: bool = described("undecided: the goodput interval holds the goal, or a percentile is within 5% of "
                               "its limit", False)
    goodput_decision: str = described("the goodput's 95% Wilson interval against the goal: pass (wholly at or "
                                      "above), fail (wholly below) or inconclusive", "inconclusive")
    goodput: float = described("fraction of sent requests that succeeded and met every limit", 0.0)
    goodput_ci_low: float = described("95% Wilson interval, low end", 0.0)
    goodput_ci_high: float = described("95% Wilson interval, high end", 1.0)
    slo_values_ms: dict[str, Any] = described("each SLO key -> the measured percentile", factory=dict, unit="ms")
    sent: int = described("requests sent at this level (pooled over repeats)", 0)
    failed: int = described("requests that failed", 0)
    repeats: int = described("times the level was measured, samples pooled (more than 1: it was undecided; "
                             "the target level is measured until its interval decides it)", 1)
    duration_s: float = described("wall time spent at this level", 0.0, unit="s")
    items_per_s: float | None = described("media: completed items per second at this level", None, unit="items/s")
    reason: str = described("why it holds or not", "")


@dataclass
class CapacityRecord(TypedRecord):
    SCHEMA = "tt-stress-capacity/1"

    name: str = described("one report item", "slo_capacity")
    model_id: str = described("model spec id of the run", "")
    metric: str = described("what the search varies: concurrency or rate (req/s)", "concurrency")
    slos: list[Any] = described("objectives, <metric>_p<pct>:<limit ms>", factory=list)
    slo_source: str = described("where the objectives came from (workflow args or the spec's targets)", "")
    goodput_goal: float = described("fraction of requests that must meet every limit", 0.95)
    isl: int = described("input tokens per request", 0)
    osl: int = described("output tokens per request", 0)
    start: float = described("first level tried", 1)
    ceiling: float = described("highest level the search may try", 1)
    resolution: float = described("bracket width at which bisection stops (relative for rates)", 1)
    capacity: float | None = described("highest level at which the SLOs held (0: not even the start)", None)
    items_per_request: int | None = described("media: items each request carries (null: LLM requests)", None)
    capacity_items_per_s: float | None = described("media: items per second measured at the capacity level", None,
                                                   unit="items/s")
    bracket_held: float | None = described("last level that held", None)
    bracket_failed: float | None = described("first level that failed (null: the ceiling held)", None)
    converged: bool = described("stopped by the resolution rule, not by noise or budget", False)
    undecided_level: float | None = described("the level the search stopped at because its 95% interval could "
                                              "not decide it (null: none)", None)
    stop_reason: str = described("why the search stopped", "")
    cliff: str | None = described("goodput collapsing between two adjacent measured levels: the lower one at or "
                                  "above the goal, the next one below half of it (records.stress.find_cliff); past "
                                  "the capacity the server does not degrade gently there; null when none was seen",
                                  None)
    target: float | None = described("capacity the spec (or capacity_target=) expects", None)
    target_source: str | None = described("where the target came from", None)
    target_met: bool | None = described("capacity >= target (null: no target)", None)
    search_wall_s: float = described("wall time of the whole search", 0.0, unit="s")
    levels: list[CapacityLevel] = described("every measured level in search order (the curve)", factory=list,
                                        record_list=CapacityLevel)
    status: str = described("passed unless the target was missed or the search could not run; inconclusive when "
                            "the target level's goodput interval still holds the goal", "failed")
    passed: bool | None = described("same as status == passed (null: inconclusive)", False)
    detail: str = described("one-line answer", "")


def find_cliff(levels: list[CapacityLevel], goal: float) -> str | None:
    """Where goodput collapses between adjacent measured levels (sorted by level): the lower level's goodput
    at or above ``goal``, the next one's below half of it. Why flag it: a capacity search reports the
    highest level that held, which reads the same whether one more user costs a few late requests or
    nearly all of them; the second is a cliff an operator must stay well clear of (an SLA search such as
    AIPerf's says so too). None when the curve degrades gently or too few levels were measured."""
    ordered = sorted(levels, key=lambda lv: lv.level)
    for low, high in zip(ordered, ordered[1:]):
        if low.goodput >= goal and high.goodput < goal / 2:
            return (f"goodput {low.goodput:.0%} at {low.level:g} falls to {high.goodput:.0%} at {high.level:g}: "
                    f"a cliff, not a gentle decline")
    return None
