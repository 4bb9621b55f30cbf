"""``BenchPoint``: the typed record of one benchmark point (``tt-bench-point/1``), stdlib only.

Why one record: the point file is the API between the benchmark client, resume logic and the
report. Both writers (our client, ``vllm bench serve``) build a ``BenchPoint``; every reader
(resume, the report builder, the console table) reads one back. Each field's one-line
description IS the legend the report prints, and the derived figures (throughputs per user,
decode/prefill throughput, request/output throughput, error rate) are computed here, once, by
``BenchMetrics.derive``, so no reader recomputes them its own way.

Metric keys follow vLLM's saved-result names so files from either tool line up key for key;
percentile keys (``p99_ttft_ms`` ...) depend on the run's ``percentiles`` and are kept as extra
keys of ``metrics``; ``describe`` explains those too.

Schema history: ``tt-bench-point/1`` gained ``metrics.error_rate`` and judged ``targets`` written
by the report's own judge (additive: older files read the same).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described
from records.reconciliation import Reconciliation
from records.spec_decode import SpecDecode

SCHEMA = "tt-bench-point/1"

#: One definition per latency family; the mean/median/std/pNN fields refer to it.
LATENCY_FAMILIES: dict[str, str] = {
    "ttft": "Time to first token (ms): dispatch -> arrival of the first SSE chunk whose `choices` is "
            "non-empty, even if its text is empty (vLLM's rule).",
    "tpot": "Time per output token after the first (ms), per request: (e2el - ttft) / (output_tokens - 1); "
            "only requests with more than one output token. Same quantity as GuideLLM/AIPerf 'ITL'.",
    "itl": "Inter-chunk latency (ms): every gap between consecutive content chunks, flattened over all "
           "completed requests (vLLM 'itl', AIPerf 'inter_chunk_latency'). Not per token if the server bundles.",
    "e2el": "End-to-end latency (ms): dispatch -> last content chunk of the request.",
    "ttft_first_nonempty": "Dispatch -> first chunk carrying non-empty text (AIPerf/inference-perf rule).",
}


def point_key(isl: int, osl: int, max_concurrency: int) -> str:
    """A point's name in reports and known_issues waivers: isl-128_osl-128_con-4."""
    return f"isl-{isl}_osl-{osl}_con-{max_concurrency}"


def _stat(stat: str, family: str) -> Any:
    return described(f"{stat} of {family}: {LATENCY_FAMILIES[family]}", None)


@dataclass
class PointParams(TypedRecord):
    """What was asked of the server at this point."""

    isl: int = described("Input sequence length: prompt tokens per request.")
    osl: int = described("Output sequence length: tokens requested per response.")
    max_concurrency: int = described("Maximum requests in flight at once.")
    num_prompts: int = described("Number of requests sent for the point.")
    request_rate: float | str | None = described(
        "Mean arrival rate (requests/s) of the measured requests; \"inf\" releases them all at once.", None)
    burstiness: float | None = described("Gamma shape of the arrival gaps (1 = Poisson).", None)
    ramp: list[Any] | None = described("Linear arrival-rate ramp [start, end] (requests/s), or null.", None)
    endpoint: str | None = described("OpenAI-compatible endpoint the requests were sent to.", None)
    dataset: str | None = described("Prompt source: random, shared_prefix or jsonl.", None)
    source: str | None = described(
        "Why the point ran: perf_reference (has targets), batch_1, max_concurrency or custom.", None)
    warmup_requests: int | None = described("Unmeasured requests sent before the measured ones.", None)

    @property
    def users(self) -> int:
        """Requests that can be in flight together: min(max_concurrency, num_prompts)."""
        return min(self.max_concurrency, self.num_prompts)

    @property
    def key(self) -> str:
        return point_key(self.isl, self.osl, self.max_concurrency)


@dataclass
class BenchMetrics(TypedRecord):
    """Summary of the measured (non-warm-up) requests of one point, in vLLM's key names."""

    duration: float | None = described(
        "Wall time (s) from the first measured request's dispatch until every measured request "
        "finished; warm-up requests are excluded.", None)
    completed: int | None = described(
        "Measured requests that streamed at least one chunk with non-empty `choices` and ended cleanly.", None)
    failed: int | None = described(
        "Measured requests that were sent but did not complete (see failures_by_class).", None)
    total_input_tokens: int | None = described(
        "Sum of prompt tokens over completed requests (server usage.prompt_tokens when "
        "reported, else the prompt's tokenizer length).", None)
    total_output_tokens: int | None = described(
        "Sum of output tokens over completed requests (see output_token_source).", None)
    request_throughput: float | None = described("completed / duration (requests/s).", None)
    output_throughput: float | None = described(
        "total_output_tokens / duration (tokens/s, whole system).", None)
    total_token_throughput: float | None = described(
        "(total_input_tokens + total_output_tokens) / duration (tokens/s).", None)
    request_goodput: float | None = described(
        "Completed requests meeting every goodput SLO (ttft, tpot, e2el; DistServe rule, "
        "tpot of a 1-token answer counts as 0) / duration; null when no SLO was given.", None)
    mean_ttft_ms: float | None = described(LATENCY_FAMILIES["ttft"], None)
    median_ttft_ms: float | None = _stat("median", "ttft")
    std_ttft_ms: float | None = _stat("std", "ttft")
    mean_tpot_ms: float | None = described(LATENCY_FAMILIES["tpot"], None)
    median_tpot_ms: float | None = _stat("median", "tpot")
    std_tpot_ms: float | None = _stat("std", "tpot")
    mean_itl_ms: float | None = described(LATENCY_FAMILIES["itl"], None)
    median_itl_ms: float | None = _stat("median", "itl")
    std_itl_ms: float | None = _stat("std", "itl")
    mean_e2el_ms: float | None = described(LATENCY_FAMILIES["e2el"], None)
    median_e2el_ms: float | None = _stat("median", "e2el")
    std_e2el_ms: float | None = _stat("std", "e2el")
    tput_user: float | None = described("Tokens/s per user = 1000 / mean_tpot_ms (Tenstorrent 't/s/u').", None)
    decode_throughput: float | None = described(
        "tput_user * min(max_concurrency, num_prompts) (tokens/s: what the concurrent users decode "
        "together; compared with the spec's `tput` target).", None)
    prefill_throughput: float | None = described(
        "isl * min(max_concurrency, num_prompts) / (mean_ttft_ms / 1000) (tokens/s: prompt tokens of the "
        "concurrent requests over the mean time to first token).", None)
    mean_ttft_first_nonempty_ms: float | None = described(LATENCY_FAMILIES["ttft_first_nonempty"], None)
    failures_by_class: dict[str, int] = described(
        "Count of failed requests per error class: http_4xx, http_5xx, connection_reset, "
        "connect_error, malformed_sse, stream_error, no_content, timeout, budget_exceeded, other.", factory=dict)
    error_rate: float | None = described(
        "Share of the point's requests that did not complete: (failed + not sent) / (completed + "
        "failed + not sent); judged against the spec's max_error_rate.", None)
    output_token_source: str | None = described(
        "Where output token counts came from: 'usage' (server usage), 'tokenizer' "
        "(generated text re-tokenized), 'chunks' (one token per content chunk; no tokenizer), "
        "or 'mixed'.", None)
    output_length_mismatches: int | None = described(
        "Completed requests whose output tokens differ from the requested osl "
        "(ignore_eos/min_tokens not honoured).", None)
    input_token_drift: float | None = described(
        "Mean (server prompt_tokens - intended isl) over completed requests that reported "
        "usage; non-zero means the prompt did not survive tokenization exactly "
        "(or the server adds BOS/template tokens).", None)
    chunks_total: int | None = described("Content chunks received over all completed requests.", None)

    def derive(self, point: PointParams, not_sent: int = 0) -> None:
        """Fill the derived figures from the measured ones; the one place they are computed.

        A throughput already present is kept (a file written by an older tool, or vLLM's own
        figure, reads unchanged); the error rate always follows the counts; a point where no
        request completed has no latencies, not latencies of 0 ms."""
        if self.completed == 0:
            for name in _LATENCY_FIELDS:
                setattr(self, name, None)
        dur = self.duration if self.duration and self.duration > 0 else None
        ok = bool(self.completed)
        if self.request_throughput is None and dur and self.completed is not None:
            self.request_throughput = self.completed / dur if ok else 0.0
        if self.output_throughput is None and dur and self.total_output_tokens is not None:
            self.output_throughput = self.total_output_tokens / dur if ok else 0.0
        if self.total_token_throughput is None and dur and self.total_output_tokens is not None:
            self.total_token_throughput = (((self.total_input_tokens or 0) + self.total_output_tokens) / dur
                                           if ok else 0.0)
        if self.tput_user is None and self.mean_tpot_ms:
            self.tput_user = 1000.0 / self.mean_tpot_ms
        if self.decode_throughput is None and self.tput_user is not None:
            self.decode_throughput = self.tput_user * point.users
        if self.prefill_throughput is None and self.mean_ttft_ms:
            self.prefill_throughput = point.isl * point.users / (self.mean_ttft_ms / 1000.0)
        total = (self.completed or 0) + (self.failed or 0) + not_sent
        self.error_rate = ((self.failed or 0) + not_sent) / total if total else None


_LATENCY_FIELDS = tuple(f"{stat}_{fam}_ms" for fam in ("ttft", "tpot", "itl", "e2el")
                        for stat in ("mean", "median", "std")) + ("mean_ttft_first_nonempty_ms",)


#: Why a point stopped sending requests (``PointSampling.stop_reason``).
STOP_REASONS: dict[str, str] = {
    "no_checks": "the point feeds no required target check: it sends its minimum and stops",
    "decided": "every required target check the point feeds is decided (pass or fail) on its 95% interval",
    "precision": "every target metric's 95% interval half-width is within the precision goal of its value "
                 "(a check still undecided then sits within that precision of its target)",
    "failed_requests": "a request failed: the error-rate rule decides the point, more samples cannot",
    "sample_budget": "another round would overrun the point's sampling budget (sample_budget_s) or time budget",
    "max_requests": "the point reached its request cap (16 x its minimum)",
    "cut_short": "a round was cut by the point budget, a signal or a silent server",
}


@dataclass
class PointSampling(TypedRecord):
    """How many requests an adaptive point sent and why it stopped (the rule: records/sampling.py).

    The point sends its minimum, then further rounds while a required target check it feeds is
    undecided on its 95% interval (the estimate the report judges: records.judge.target_estimates for
    an LLM point, records.media_estimates.figure_estimates for a media point) and its precision goal is
    not met, within its sampling budget. The point's duration sums the rounds (the pause between
    rounds, while the rule is evaluated, is not counted). LLM points (``BenchPoint.sampling``) and media
    perf-reference points (``records.media.MediaPoint.sampling``) carry it."""

    min_requests: int = described("Requests the point sends at least (an LLM point's num_prompts; a media point's "
                                  "planned minimum, in whole rounds of its concurrency).")
    requests: int = described("Measured requests sent over all rounds.")
    rounds: int = described("Rounds of requests sent (1: the minimum was enough).")
    stop_reason: str = described("Why it stopped: " + "; ".join(f"{k}: {v}" for k, v in STOP_REASONS.items()) + ".")
    precision: float = described("Precision goal: a 95% interval half-width at most this share of the value.")
    budget_s: float = described("Seconds of measured requests after which no further round starts "
                                "(sample_budget_s, capped by the point's time budget).")
    decisions: dict[str, str] = described(
        "Required target check ('<metric> <point> <tier>') -> its decision on the samples at the stop.",
        factory=dict)
    detail: str | None = described("The stop in words, with the numbers.", None)


@dataclass
class BenchPoint(TypedRecord):
    """One benchmark point as measured by one tool."""

    SCHEMA = SCHEMA

    model_id: str = described("Model id of the spec the point was run for.")
    tool: str = described("Load generator that measured the point: tt-bench (our client), vllm-bench "
                          "(`vllm bench serve`), aiperf or guidellm (benchmarking/tools/).")
    point: PointParams = described("The point's parameters.", record=PointParams)
    metrics: BenchMetrics = described("Summary metrics of the measured requests.", record=BenchMetrics)
    served_model_name: str | None = described("Model name the requests carried.", None)
    started: str | None = described("When the point's measured requests started (ISO 8601, UTC).", None)
    ended: str | None = described("When the point finished (ISO 8601, UTC).", None)
    targets: dict[str, dict[str, Any]] = described(
        "Per tier: the spec's targets and the report judge's verdict on this point "
        "(records.judge.check_tier); the report judges again from the run's spec.", factory=dict)
    requests_file: str | None = described("Per-request rows (JSONL), relative to the run directory.", None)
    raw_file: str | None = described("The comparison tool's own result file, relative to the run directory.", None)
    command: str | None = described("The comparison tool's command line (files of a side-by-side tools=vllm run).",
                                    None)
    tool_version: str | None = described("Version of the tool that measured the point (another tool than ours).",
                                         None)
    tool_command: str | None = described("The exact command that ran the tool for this point, the API key "
                                         "redacted (another tool than ours).", None)
    prompts_from: str | None = described(
        "Who made the prompts of another tool's point: 'ours' (the prompts our client would send, given to the "
        "tool as a dataset file) or 'tool' (the tool's own synthetic prompts of the same ISL/OSL).", None)
    prompt_check: dict[str, Any] | None = described(
        "How many prompts were re-tokenized to verify their length, and the largest drift.", None)
    percentiles: list[Any] | None = described("Percentiles written as pNN_<metric>_ms keys.", None)
    goodput_slos: dict[str, Any] | None = described("Goodput SLOs (ms) per metric, or null.", None)
    budget_exhausted: bool | None = described("The point's time budget ran out before every request finished.", None)
    not_sent: int | None = described("Requests never sent (the budget ran out, or a signal stopped the point).", None)
    server_metrics: dict[str, Any] | None = described("Server /metrics snapshot file and headline deltas, or null.",
                                                      None)
    warnings: list[Any] | None = described("Things the reader should know about this point's numbers.", None)
    interrupted: str | None = described("Signal that cut the point short (SIGINT, SIGTERM), or null.", None)
    complete: bool | None = described("Every request of the point was run (false: partial, re-run on resume).", None)
    workload: dict[str, Any] | None = described(
        "The workload that made the traffic (benchmarking/workloads/) and its own figures: trace (per-request "
        "lateness behind the trace's timestamps, whether the client kept up, offered vs sent vs completed "
        "requests per second), multi_turn (TTFT per turn), shared_prefix (the server's prefix-cache hit rate "
        "and TTFT with vs without the shared prefixes); null for independent prompts.", None)
    server_state: dict[str, Any] | None = described(
        "The server's /metrics sampled about once a second during the point (contracts/server_state.py): "
        "t_s (seconds since the point started, the request rows' clock minus origin_perf_s) and series such "
        "as running, waiting, kv_cache_usage_pct, prefix_cache_hit_rate, queue_depth, mean_batch_size; "
        "null when the server has no /metrics.", None)
    server_core_seconds: float | None = described(
        "CPU core-seconds the server spent over the point: user + system time of its process tree (/proc), or "
        "its container's cgroup cpu.stat (contracts/cpu_cost.py); null when unknown (cost_note says why).", None)
    core_seconds_per_1k_output_tokens: float | None = described(
        "server_core_seconds * 1000 / metrics.total_output_tokens: the CPU cost of 1000 generated tokens.", None)
    energy_joules: float | None = described(
        "Host energy over the point from RAPL package counters (/sys/class/powercap); null where the host has "
        "none (cost_note).", None)
    joules_per_1k_output_tokens: float | None = described("energy_joules * 1000 / metrics.total_output_tokens.",
                                                          None)
    cost_note: str | None = described("What the cost figures measured (process tree, cgroup), or why one is n/a.",
                                      None)
    reconciliation: Reconciliation | None = described(
        "The server's request and token counters over the point against what its client sent, and whether the "
        "client kept its schedule (records/reconciliation.py): status clean | contaminated | uncounted | "
        "not_reconciled; a point that is not clean, or is client-bound, decides no target or comparison. Null "
        "for a point measured by another tool or written before reconciliation existed.", None,
        record=Reconciliation)
    sampling: PointSampling | None = described(
        "Adaptive sample size: minimum and sent requests, rounds, and why the point stopped; null for a point "
        "measured in one fixed round (a workload, or another tool).", None, record=PointSampling)
    spec_decode: SpecDecode | None = described(
        "Speculative decoding over the point (records/spec_decode.py): drafts, draft and accepted tokens, the "
        "acceptance rate, the mean accepted length and the acceptance per position, each with its 95% interval, "
        "from the server's spec-decode counters before and after the point; null when the server does not "
        "speculate.", None, record=SpecDecode)

    def set_cost(self, cost: Any, watched: str) -> None:
        """Fill the cost fields from a contracts.cpu_cost.Cost of the point and what it watched."""
        tokens = self.metrics.total_output_tokens or 0
        self.server_core_seconds = None if cost.core_seconds is None else round(cost.core_seconds, 3)
        per = cost.per(tokens, 1000)
        self.core_seconds_per_1k_output_tokens = None if per is None else round(per, 4)
        self.energy_joules = None if cost.energy_joules is None else round(cost.energy_joules, 3)
        joules = cost.energy_per(tokens, 1000)
        self.joules_per_1k_output_tokens = None if joules is None else round(joules, 4)
        notes = [f"CPU: {watched}" if cost.core_seconds is not None else f"CPU n/a: {cost.cpu_note}"]
        if cost.energy_note:
            notes.append(f"energy n/a: {cost.energy_note}")
        self.cost_note = "; ".join(notes)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.metrics.derive(self.point, self.unsent_failures)

    def to_dict(self) -> dict[str, Any]:
        # Optional fields a tool does not produce stay out of its file (a vllm-bench point has
        # no prompt_check), so a file holds what was measured and nothing invented.
        data = super().to_dict()
        for name in _OMIT_WHEN_NONE:
            if data.get(name) is None:
                data.pop(name, None)
        first = {k: data.pop(k) for k in _FIRST if k in data}  # who and what before the numbers
        return {**first, **data}

    @property
    def key(self) -> str:
        return self.point.key

    @property
    def partial(self) -> bool:
        """Cut short by a signal: resume runs it again."""
        return bool(self.interrupted) or self.complete is False

    @property
    def unsent_failures(self) -> int:
        """Requests the budget left unsent: failures of the point. Requests a signal left unsent
        are not the server's failures (the point is partial, and resume runs it again)."""
        return 0 if self.interrupted else (self.not_sent or 0)

    def failure_classes(self) -> dict[str, int]:
        """Failed requests per class, requests the budget left unsent included (not_sent)."""
        out = dict(self.metrics.failures_by_class or {})
        if self.unsent_failures:
            out["not_sent"] = out.get("not_sent", 0) + self.unsent_failures
        return out

    def requests_total(self) -> int:
        return (self.metrics.completed or 0) + (self.metrics.failed or 0) + self.unsent_failures

    def failure_summary(self) -> str:
        """'3 of 8 requests failed (http_5xx 2, connection_reset 1)'; '' when none failed."""
        classes = self.failure_classes()
        failed = sum(classes.values())
        return f"{failed} of {self.requests_total()} requests failed ({format_classes(classes)})" if failed else ""


_FIRST = ("schema", "model_id", "served_model_name", "tool", "point", "started", "ended")
_OMIT_WHEN_NONE = ("raw_file", "command", "tool_version", "tool_command", "prompts_from", "prompt_check",
                   "percentiles", "goodput_slos", "budget_exhausted",
                   "not_sent", "server_metrics", "warnings", "complete", "workload", "server_state", "sampling",
                   "reconciliation", "spec_decode")


def format_classes(classes: dict[str, int]) -> str:
    """'http_5xx 2, connection_reset 1': most frequent first, then by name; '' when none."""
    return ", ".join(f"{name} {count}" for name, count in
                     sorted(classes.items(), key=lambda kv: (-kv[1], kv[0])) if count)


def describe(key: str) -> str:
    """Definition of a saved metric key, e.g. 'p99_itl_ms' -> the itl family with the statistic named."""
    legend = BenchMetrics.legend()
    if key in legend:
        return legend[key]
    if key.startswith("p") and key.endswith("_ms") and "_" in key:
        pct, _, rest = key[1:].partition("_")
        family = rest[:-3]
        if family in LATENCY_FAMILIES:
            return f"{pct}th percentile (linear interpolation) of {family}: {LATENCY_FAMILIES[family]}"
    return ""


__all__ = ["SCHEMA", "LATENCY_FAMILIES", "PointParams", "BenchMetrics", "BenchPoint", "PointSampling", "STOP_REASONS",
           "describe",
           "format_classes", "point_key"]
