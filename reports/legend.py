"""Metric legend shown under every report: which record fields to explain, with their labels.

The definitions are the records' own field descriptions (``BenchPoint``'s parts for benchmark
numbers, the report record's parts for the verdict terms); this module only picks the rows and
the label each row goes by in the tables, so a definition is written once, on its field.
"""
from __future__ import annotations

from records.bench import BenchMetrics, PointParams, PointSampling
from records.report import Check, Comparison, ComparisonMetric, EvalRow, TargetRow, TierCheck, Verdict, Waived

#: (label shown in the report, record, field); the label is the table header where there is one.
ROWS: list[tuple[str, type, str]] = [
    ("ISL", PointParams, "isl"),
    ("OSL", PointParams, "osl"),
    ("Concurrency", PointParams, "max_concurrency"),
    ("Completed", BenchMetrics, "completed"),
    ("Failed", BenchMetrics, "failed"),
    ("Planned", PointSampling, "min_requests"),
    ("TTFT (ms)", BenchMetrics, "mean_ttft_ms"),
    ("TPOT (ms)", BenchMetrics, "mean_tpot_ms"),
    ("ITL (ms)", BenchMetrics, "mean_itl_ms"),
    ("t/s/u", BenchMetrics, "tput_user"),
    ("Decode (t/s)", BenchMetrics, "decode_throughput"),
    ("Prefill (t/s)", BenchMetrics, "prefill_throughput"),
    ("E2EL (ms)", BenchMetrics, "mean_e2el_ms"),
    ("req/s", BenchMetrics, "request_throughput"),
    ("Output (t/s)", BenchMetrics, "output_throughput"),
    ("duration", BenchMetrics, "duration"),
    ("total_input_tokens", BenchMetrics, "total_input_tokens"),
    ("total_output_tokens", BenchMetrics, "total_output_tokens"),
    ("total_token_throughput", BenchMetrics, "total_token_throughput"),
    ("request_goodput", BenchMetrics, "request_goodput"),
    ("ttft_first_nonempty", BenchMetrics, "mean_ttft_first_nonempty_ms"),
    ("failures_by_class", BenchMetrics, "failures_by_class"),
    ("error_rate", BenchMetrics, "error_rate"),
    ("output_token_source", BenchMetrics, "output_token_source"),
    ("output_length_mismatches", BenchMetrics, "output_length_mismatches"),
    ("input_token_drift", BenchMetrics, "input_token_drift"),
    ("tput", TierCheck, "tput"),
    ("ttft_ratio", TierCheck, "ttft_ratio"),
    ("tput_user_ratio", TierCheck, "tput_user_ratio"),
    ("tput_ratio", TierCheck, "tput_ratio"),
    ("Ratio", TierCheck, "passed"),
    ("Result", TierCheck, "decision"),
    ("Target decision", TierCheck, "ttft_ms_decision"),
    ("Error rate check", TargetRow, "error_rate_decision"),
    ("Tiers", TargetRow, "tiers"),
    ("Accuracy check", EvalRow, "decision"),
    ("95% interval", EvalRow, "ci95"),
    ("Target", EvalRow, "target"),
    ("In-process [95% CI]", EvalRow, "in_process_ci95"),
    ("Served vs in-process", EvalRow, "serving_decision"),
    ("Check", Check, "name"),
    ("Value [95% CI]", Check, "ci95"),
    ("n", Check, "n"),
    ("Check target", Check, "target"),
    ("Decision", Check, "decision"),
    ("Required", Check, "required"),
    ("Waived", Waived, "waiver_reason"),
    ("Verdict", Verdict, "result"),
    ("Ratio [95% CI]", ComparisonMetric, "ci95"),
    ("Comparison decision", ComparisonMetric, "decision"),
    ("Tolerance", Comparison, "tolerance"),
    ("Host fingerprint", Comparison, "same_host"),
]


def legend() -> list[tuple[str, str, str]]:
    """(field, label, definition) rows: benchmark metrics first, then the verdict's terms."""
    return [(field, label, record.legend()[field]) for label, record, field in ROWS]
