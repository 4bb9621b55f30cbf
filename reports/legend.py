"""Metric legend shown under every report.

The benchmark definitions belong to the load generator (``benchmarking/metrics_legend.py``
exports ``LEGEND``: key -> definition); when it can be imported its wording wins so the report
and the tool can never disagree. Our own definitions fill any key it lacks, so the legend is
complete either way.
"""
from __future__ import annotations

# key -> (display label, definition)
_OWN: dict[str, tuple[str, str]] = {
    "isl": ("ISL", "Input sequence length: prompt tokens per request."),
    "osl": ("OSL", "Output sequence length: tokens requested per response."),
    "max_concurrency": ("Concurrency", "Maximum requests in flight at once."),
    "num_prompts": ("N", "Number of requests sent for the point."),
    "ttft": ("TTFT (ms)", "Time to first token: from sending the request to the first streamed "
             "chunk that carries choices (mean over successful requests)."),
    "tpot": ("TPOT (ms)", "Time per output token after the first: "
             "(E2EL - TTFT) / (output tokens - 1), averaged over requests."),
    "itl": ("ITL (ms)", "Inter-token latency: the gap between consecutive streamed chunks."),
    "tput_user": ("t/s/u", "Tokens per second per user: 1000 / mean TPOT."),
    "decode_throughput": ("Decode (t/s)", "Decode throughput: t/s/u x min(concurrency, N)."),
    "prefill_throughput": ("Prefill (t/s)", "Prefill throughput: ISL x min(concurrency, N) / "
                           "(mean TTFT / 1000)."),
    "e2el": ("E2EL (ms)", "End-to-end latency: from sending the request to the last token "
             "(mean)."),
    "request_throughput": ("req/s", "Completed requests per second of benchmark wall time."),
    "output_throughput": ("Output (t/s)", "Output tokens per second of benchmark wall time, "
                          "all users together."),
}

_REPORT_ONLY: dict[str, tuple[str, str]] = {
    "ratio": ("Ratio", "measured / target. TTFT passes when the ratio is <= 1 (not slower than "
              "the target); t/s/u and decode throughput pass when it is >= 1."),
    "tiers": ("Tiers", "functional, complete and target tiers from the model's perf reference; "
              "the model status decides which are required: EXPERIMENTAL none, FUNCTIONAL "
              "functional, COMPLETE functional + complete, TOP_PERF all three."),
    "eval_check": ("Accuracy check", "An eval passes when score / reference score >= 1 - "
                   "tolerance (the published score is used when there is no reference). "
                   "Evals are required for every status but EXPERIMENTAL."),
    "waiver": ("Waived", "A blocker matched by a known_issues entry in the model spec; it is "
               "shown with the waiver's reason and does not fail the verdict."),
    "verdict": ("Verdict", "PASS when no unwaived blockers remain. Blockers: a failed run "
                "step, a required-tier target missed or its point not run, a failed or "
                "errored eval (or none when evals ran), a failed test or stress record. "
                "Sections not part of the run are listed as not run, never as failures."),
}

#: Aliases the benchmarking module may use for the same metric.
_ALIASES = {"ttft_ms": "ttft", "mean_ttft_ms": "ttft", "tpot_ms": "tpot", "mean_tpot_ms": "tpot",
            "itl_ms": "itl", "mean_itl_ms": "itl", "e2el_ms": "e2el", "mean_e2el_ms": "e2el"}


def legend() -> list[tuple[str, str, str]]:
    """Return (key, label, definition) rows: benchmark metrics first, then report terms."""
    merged = dict(_OWN)
    try:
        from benchmarking.metrics_legend import LEGEND  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - any failure means: use our own wording
        LEGEND = {}
    if isinstance(LEGEND, dict):
        for key, definition in LEGEND.items():
            if not isinstance(definition, str):
                continue
            own_key = _ALIASES.get(str(key), str(key))
            label = merged.get(own_key, (str(key), ""))[0]
            merged[own_key] = (label, definition)
    merged.update(_REPORT_ONLY)
    return [(k, label, text) for k, (label, text) in merged.items()]
