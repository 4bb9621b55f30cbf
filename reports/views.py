"""Table views of the report record, shared by every renderer.

Markdown, console, HTML and CSV all show the same columns with the same rounding, so the
column definitions live here once instead of drifting apart in four renderers.
"""
from __future__ import annotations

from typing import Any, Callable

from records.report import TIERS, ReportRecord, TargetRow
from reports import units

Column = tuple[str, Callable[[Any], str]]


def num(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:,.{digits}f}"


def check(value: bool | None) -> str:
    return "n/a" if value is None else ("PASS" if value else "FAIL")


def cost(value: float | None, note: str | None) -> str:
    """A cost figure; n/a when the point measured none (its cost_note says why), '-' for older points."""
    if value is None:
        return "n/a" if note else "-"
    return f"{value:.4g}"


def ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def ms(value: float | None) -> str:
    """A latency in a table whose header names the unit: '507', '42.5'."""
    return units.number(value, units.MS)


def tps(value: float | None) -> str:
    """A throughput in a table whose header names the unit: '14.14', '133.5'."""
    return units.number(value, units.Unit("rate"))


#: What was measured comes first (Completed, Failed: the requests the numbers are made of); Planned is the
#: point's num_prompts, the minimum an adaptive point sends, and is not what its numbers rest on.
BENCHMARK_COLUMNS: list[Column] = [
    ("ISL", lambda r: str(r.isl)),
    ("OSL", lambda r: str(r.osl)),
    ("Concurrency", lambda r: str(r.max_concurrency)),
    ("Completed", lambda r: num(r.completed)),
    ("Failed", lambda r: num(r.failed)),
    ("TTFT (ms)", lambda r: ms(r.mean_ttft_ms)),
    ("TPOT (ms)", lambda r: ms(r.mean_tpot_ms)),
    ("t/s/u", lambda r: tps(r.tput_user)),
    ("Decode (t/s)", lambda r: tps(r.decode_throughput)),
    ("Prefill (t/s)", lambda r: tps(r.prefill_throughput)),
    ("Server core-s / 1k out tok", lambda r: cost(r.core_seconds_per_1k_output_tokens, r.cost_note)),
    ("J / 1k out tok", lambda r: cost(r.joules_per_1k_output_tokens, r.cost_note)),
    ("E2EL (ms)", lambda r: ms(r.mean_e2el_ms)),
    ("req/s", lambda r: num(r.request_throughput, 3)),
    ("Failure classes", lambda r: r.failure_text() or "none"),
    ("Planned", lambda r: str(r.num_prompts)),
    ("Reconciled", lambda r: r.reconciliation or "-"),
]


def reconciliation_lines(record: ReportRecord) -> list[str]:
    """One line per point with a reconciliation (records/reconciliation.py): its status and what the server's
    counters said against the client's, so a reader sees why a point decides nothing."""
    return [f"{r.key} (n={r.num_prompts}): {r.reconciliation}: {r.reconciliation_detail}"
            for r in record.benchmarks if r.reconciliation]


def benchmark_columns(record: ReportRecord) -> list[Column]:
    """BENCHMARK_COLUMNS, with each point's cost per million output tokens beside its core-seconds when the
    run gave the machine's price (--workflow-args hourly_cost: ``reports.pricing``)."""
    if record.pricing is None:
        return BENCHMARK_COLUMNS
    cols = list(BENCHMARK_COLUMNS)
    at = [h for h, _ in cols].index("Server core-s / 1k out tok") + 1
    cols.insert(at, (f"{record.pricing.currency} / 1M out tok",
                     lambda r: units.number(r.cost_per_1m_output_tokens, units.Unit("money"))))
    return cols


def pricing_line(record: ReportRecord) -> str | None:
    """'Price 2.50 USD per hour: a million output tokens cost 20.77 USD at the SLO capacity (concurrency 4,
    37.10 output tokens/s); per point in the benchmarks table (the formula).'"""
    p = record.pricing
    if p is None:
        return None
    at = ""
    if p.capacity_cost_per_1m_output_tokens is not None:
        cost = units.number(p.capacity_cost_per_1m_output_tokens, units.Unit("money"))
        at = (f": a million output tokens cost {cost} {p.currency} at the SLO capacity ({p.capacity_metric} "
              f"{p.capacity_level:g}, {tps(p.capacity_output_tok_s)} output tokens/s)")
    price = units.number(p.hourly_cost, units.Unit("money"))
    return f"Price {price} {p.currency} per hour{at}; per point in the benchmarks table ({p.formula})."


def tiers_present(record: ReportRecord) -> list[str]:
    seen = {t.tier for row in record.targets for t in row.tiers}
    return [t for t in TIERS if t in seen]


def _tier(row: TargetRow, tier: str):
    return next((t for t in row.tiers if t.tier == tier), None)


TARGET_BASE_COLUMNS: list[Column] = [
    ("Point", lambda r: r.key),
    ("Ran", lambda r: "yes" if r.ran else "NO"),
    ("TTFT (ms)", lambda r: ms(r.measured_ttft_ms)),
    ("t/s/u", lambda r: tps(r.measured_tput_user)),
    ("Decode (t/s)", lambda r: tps(r.measured_tput)),
]

#: Target key -> (the TargetRow field it is measured by, the TierCheck ratio field).
TARGET_FIELDS = {"ttft_ms": ("measured_ttft_ms", "ttft_ratio"), "tput_user": ("measured_tput_user", "tput_user_ratio"),
                 "tput": ("measured_tput", "tput_ratio")}


def target_cell(row: TargetRow, tier, key: str) -> str:
    """'507 ms [490, 526] vs 500 ms (1.01): INCONCLUSIVE': the measured value with its 95% interval, the
    target, the ratio, and the verdict's decision of that target (its check), never a pass/fail of the value
    alone: the value can be on one side of the target while its interval still holds it."""
    target = getattr(tier, key)
    if target is None:
        return "no target (not checked)"
    unit = units.unit_of(key)
    measured_field, ratio_field = TARGET_FIELDS[key]
    measured = getattr(row, measured_field)
    decided = getattr(tier, f"{key}_decision", None)
    shown = f": {decision_text(decided)}" if decided else ""
    if measured is None:
        return f"not measured vs {units.number(target, unit, suffix=True)}{shown or ' (fails)'}"
    return (f"{units.with_interval(measured, row.ci95.get(key), unit)} vs {units.number(target, unit, suffix=True)} "
            f"({ratio(getattr(tier, ratio_field))}){shown}")


#: Long format for markdown/HTML: one row per (point, tier); each target cell is "measured [95% CI] vs target
#: (ratio): DECISION" so a reader sees how far from the target each number is and what the verdict decided.
TIER_COLUMNS: list[Column] = [
    ("Point", lambda p: p[0].key),
    ("Tier", lambda p: p[1].tier),
    ("Required", lambda p: "yes" if p[1].required else "no"),
    ("Result", lambda p: tier_result(p[0], p[1]).replace(" (req)", "")),
    ("TTFT: measured [95% CI] vs target (ratio): decision", lambda p: target_cell(p[0], p[1], "ttft_ms")),
    ("t/s/u: measured [95% CI] vs target (ratio): decision", lambda p: target_cell(p[0], p[1], "tput_user")),
    ("Decode: measured [95% CI] vs target (ratio): decision", lambda p: target_cell(p[0], p[1], "tput")),
    ("Error rate check", lambda p: error_rate_text(p[0], p[1])),
]


def error_rate_text(row: TargetRow, tier) -> str:
    """The point's error-rate check as the verdict decided it (before a verdict: within the allowance or not)."""
    if row.error_rate_decision:
        return decision_text(row.error_rate_decision)
    return check(tier.error_rate_pass)


def tier_rows(record: ReportRecord) -> list[tuple[TargetRow, Any]]:
    return [(row, check) for row in record.targets for check in row.tiers]


def compact_target_columns(record: ReportRecord) -> list[Column]:
    """Narrow variant for the console: one cell per tier, "RESULT r=ttft/tput_user/tput"."""
    cols = list(TARGET_BASE_COLUMNS)
    for tier in tiers_present(record):
        cols.append((f"{tier.title()} (ratios ttft/tpu/tput)",
                     lambda r, t=tier: _compact(r, _tier(r, t))))
    return cols


def _compact(row: TargetRow, t) -> str:
    if t is None:
        return "n/a"
    ratios = "/".join(ratio(x) for x in (t.ttft_ratio, t.tput_user_ratio, t.tput_ratio))
    errors = " errors>allowed" if t.error_rate_pass is False else ""
    return f"{tier_result(row, t)} {ratios}{errors}" if row.ran else tier_result(row, t)


def tier_result(row: TargetRow, t) -> str:
    """The tier's decision at the point as the verdict made it (``TierCheck.decision``); a report built
    without judging benchmarks falls back to the point values' pass/fail."""
    if t is None:
        return "n/a"
    label = "NOT RUN" if not row.ran else decision_text(t.decision) if t.decision else check(t.passed)
    return f"{label}{' (req)' if t.required else ''}"


def value_with_interval(value: float | None, ci95: list[float] | None, digits: int = 4) -> str:
    """'0.6917 [0.608, 0.775]': the value and its 95% interval."""
    if value is None:
        return "n/a"
    if not ci95:
        return num(value, digits)
    return f"{value:.{digits}f} [{ci95[0]:.{digits - 1}f}, {ci95[1]:.{digits - 1}f}]"


def decision_text(decision: str | None, passed: bool | None = None) -> str:
    """'PASS', 'FAIL', 'INCONCLUSIVE', 'WAIVED', 'NOT RUN' (a decision), or the pass flag's when there is none."""
    return (decision or {True: "pass", False: "fail"}.get(passed, "n/a")).replace("_", " ").upper()


EVAL_COLUMNS: list[Column] = [
    ("Task", lambda e: e.task),
    ("Check", lambda e: "ERROR" if e.status == "error" else decision_text(e.decision, e.passed)),
    ("Metric", lambda e: e.metric or "n/a"),
    ("Score [95% CI]", lambda e: value_with_interval(e.value, e.ci95)),
    ("Target", lambda e: num(e.target, 4)),
    ("Reference", lambda e: num(e.reference_score, 4)),
    ("In-process [95% CI]", lambda e: value_with_interval(e.in_process_score, e.in_process_ci95)),
    ("Served vs in-process", lambda e: (e.serving_decision or "n/a").upper()),
    ("Ratio to ref", lambda e: ratio(e.ratio_to_reference)),
    ("Published", lambda e: num(e.published_score, 4)),
    ("Ratio to pub", lambda e: ratio(e.ratio_to_published)),
    ("Tolerance", lambda e: num(e.tolerance, 2)),
    ("Samples", lambda e: num(e.samples)),
    ("Mode", lambda e: e.mode or "n/a"),
]


def cells(columns: list[Column], row: Any) -> list[str]:
    return [fn(row) for _, fn in columns]


def eval_rows(record: ReportRecord) -> list[list[str]]:
    """The evals table's rows, each decision cell showing the verdict's check of that claim ('accuracy <task>',
    'served vs in-process <task>'): a waiver applied by the verdict shows WAIVED here too, not the record's own
    decision beside a WAIVED check."""
    decided = {c.name: c.decision for c in record.verdict.checks if c.category == "evals"}
    heads = [h for h, _ in EVAL_COLUMNS]
    out = []
    for e in record.evals:
        row = cells(EVAL_COLUMNS, e)
        for head, claim in (("Check", f"accuracy {e.task}"),
                            ("Served vs in-process", f"served vs in-process {e.task}")):
            if claim in decided and e.status != "error":
                row[heads.index(head)] = decision_text(decided[claim])
        out.append(row)
    return out


def metadata_rows(record: ReportRecord) -> list[tuple[str, str]]:
    m = record.metadata
    env = m.environment
    pkgs = ", ".join(f"{k}=={v}" for k, v in sorted(env.packages.items())) or "n/a"
    host = env.host
    host_text = "; ".join(x for x in (
        host.cpu, f"{host.cores} cores" if host.cores else None,
        f"{host.ram_gb} GB RAM" if host.ram_gb is not None else None, host.os) if x) or "n/a"
    where = "recorded by the run" if env.source == "manifest" else (
        "gathered when the report was built (the run did not record it)")
    rows = [
        ("Model", m.model_name or m.model_id), ("Model id", m.model_id),
        ("HF repo", m.hf_model_repo), ("Served name", m.served_model_name),
        ("Device", m.device), ("Implementation", m.impl_name or m.impl_id),
        ("Engine", m.engine), ("Status", m.model_status), ("Spec version", m.model_version),
        ("Docker image", m.docker_image), ("tt-metal commit", m.tt_metal_commit),
        ("vLLM commit", m.vllm_commit), ("Run id", m.run_id), ("Workflow", m.workflow),
        ("Run status", m.run_status), ("Started", m.run_started), ("Ended", m.run_ended),
        ("Duration (s)", num(m.duration_s)), ("Command", m.run_command),
        ("Passed through", "; ".join(f"{k} -> {', '.join(w) or 'none'}"
                                     for k, w in m.workflow_args_passthrough.items())),
        ("Python", env.python), ("Packages", pkgs), ("Host", host_text),
        ("Environment source", where), ("Report generated", m.generated_at),
    ]
    return [(k, v if v not in (None, "") else "n/a") for k, v in rows]


CHECK_COLUMNS: list[Column] = [
    ("Check", lambda c: c.name),
    ("Required", lambda c: "yes" if c.required else "no"),
    ("Value [95% CI]", lambda c: units.with_interval(c.value, c.ci95, units.check_unit(c.name, c.ci_method))),
    ("n", lambda c: num(c.n)),
    ("Target", lambda c: units.number(c.target, units.check_unit(c.name, c.ci_method), suffix=True)),
    ("Decision", lambda c: decision_text(c.decision)),
    ("Detail", lambda c: c.detail or ""),
]


def verdict_line(record: ReportRecord) -> str:
    v = record.verdict
    undecided = sum(1 for c in v.checks if c.required and c.decision == "inconclusive")
    text = (f"VERDICT: {v.result} - {record.metadata.model_id} on {record.metadata.device} "
            f"(status {v.model_status or 'n/a'}; required tiers: "
            f"{', '.join(v.required_tiers) or 'none'}; evals "
            f"{'required' if v.evals_required else 'not required'}; "
            f"{len(v.blockers)} blocker(s), {len(v.waived)} waived"
            f"{f', {undecided} undecided' if undecided else ''})")
    return text + comparison_clause(record)


def comparison_clause(record: ReportRecord) -> str:
    """What the comparison with a baseline run did to the verdict, in the verdict line: a gate the user asked
    for, or the release's own comparison with the last run (advisory where it could not decide)."""
    c = record.comparison
    if c is None or not c.metrics:
        return ""
    regressed = sum(m.decision == "regressed" for m in c.metrics)
    undecided = sum(m.decision == "inconclusive" for m in c.metrics)
    said = f"{regressed} regressed, {undecided} undecided of {len(c.metrics)}"
    if c.gate:
        return f"; comparison with {c.baseline_run} (a gate): {said}"
    return (f"; comparison with the last run {c.baseline_run} (advisory where undecided"
            f"{'; regressions warn only' if c.on_regression == 'warn' else ''}): {said}")
