"""``summary.csv``: one flat table for spreadsheets and dashboards.

One row per benchmark point, per eval task, per test/stress record, one ``check`` row per number the
verdict decided (its value, 95% interval, n, target and decision), and a final verdict row. A
``section`` column says which; columns that do not apply to a row are left empty, so the file loads
into any tool without knowing the report schema. A tier's ``<tier>_result`` is the verdict's decision of
that tier at the point (``TierCheck.decision``), the same word every other renderer shows.
"""
from __future__ import annotations

import csv
import io

from records.report import TIERS, ReportRecord
from reports.section_tables import csv_rows

FIELDS = [
    "section", "item", "model_id", "device", "run_id",
    "isl", "osl", "max_concurrency", "num_prompts", "completed", "failed", "failure_classes",
    "mean_ttft_ms", "mean_tpot_ms", "tput_user", "decode_throughput", "prefill_throughput",
    "mean_e2el_ms", "request_throughput", "output_throughput", "cost_per_1m_output_tokens", "currency",
    *(f"{t}_result" for t in TIERS),
    "metric", "value", "ci95_low", "ci95_high", "n", "target", "reference_score", "ratio_to_reference",
    "published_score", "ratio_to_published", "result", "detail", "figures",
]


def _b(value: bool | None) -> str:
    return "" if value is None else ("PASS" if value else "FAIL")


def _f(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def _decision(decision: str | None, passed: bool | None) -> str:
    """A tier's decision as every renderer words it (views.decision_text), '' when there is none."""
    if decision is None and passed is None:
        return ""
    return decision.replace("_", " ").upper() if decision else _b(passed)


def _check_rows(record: ReportRecord, base: dict) -> list[dict]:
    """One row per verdict check: the claim (item = the check's name), its numbers and its decision."""
    return [{**base, "section": "check", "item": c.name, "metric": c.name.split()[0], "value": _f(c.value, 6),
             "ci95_low": _f(c.ci95[0], 6) if c.ci95 else "", "ci95_high": _f(c.ci95[1], 6) if c.ci95 else "",
             "n": _f(c.n), "target": _f(c.target, 6), "result": c.decision.replace("_", " ").upper(),
             "detail": c.detail or ""} for c in record.verdict.checks]


def _pricing_rows(record: ReportRecord, base: dict) -> list[dict]:
    """The price and the cost of a million output tokens at the SLO capacity (none without a price)."""
    p = record.pricing
    if p is None:
        return []
    level = "n/a" if p.capacity_level is None else f"{p.capacity_metric} {p.capacity_level:g}"
    return [{**base, "section": "pricing", "item": "capacity", "metric": "cost_per_1m_output_tokens",
             "value": _f(p.capacity_cost_per_1m_output_tokens, 4), "output_throughput": _f(p.capacity_output_tok_s),
             "cost_per_1m_output_tokens": _f(p.capacity_cost_per_1m_output_tokens, 4), "currency": p.currency,
             "detail": f"hourly_cost {p.hourly_cost:g} {p.currency}; capacity {level}; {p.formula}"}]


def _benchmark_rows(record: ReportRecord, base: dict) -> list[dict]:
    """One row per benchmark point, with the verdict's decision of each tier at the point it judged."""
    targets = {t.point_file or t.key: t for t in record.targets}
    rows = []
    for r in record.benchmarks:
        row = {**base, "section": "benchmark", "item": r.key, "isl": r.isl, "osl": r.osl,
               "max_concurrency": r.max_concurrency, "num_prompts": r.num_prompts,
               "completed": _f(r.completed), "failed": _f(r.failed),
               "failure_classes": r.failure_text(),
               "mean_ttft_ms": _f(r.mean_ttft_ms), "mean_tpot_ms": _f(r.mean_tpot_ms),
               "tput_user": _f(r.tput_user), "decode_throughput": _f(r.decode_throughput),
               "prefill_throughput": _f(r.prefill_throughput),
               "mean_e2el_ms": _f(r.mean_e2el_ms), "request_throughput": _f(r.request_throughput),
               "output_throughput": _f(r.output_throughput),
               "cost_per_1m_output_tokens": _f(r.cost_per_1m_output_tokens, 4),
               "currency": record.pricing.currency if record.pricing else ""}
        target = targets.get(r.point_file or r.key)
        if target is not None:
            for check in target.tiers:
                row[f"{check.tier}_result"] = _decision(check.decision, check.passed)
        rows.append(row)
    return rows


def render_csv(record: ReportRecord) -> str:
    m = record.metadata
    base = {"model_id": m.model_id, "device": m.device or "", "run_id": m.run_id}
    rows: list[dict[str, str]] = _benchmark_rows(record, base)
    ran = {r.key for r in record.benchmarks}
    for t in record.targets:
        if t.key not in ran:
            rows.append({**base, "section": "benchmark", "item": t.key, "isl": t.isl,
                         "osl": t.osl, "max_concurrency": t.max_concurrency,
                         "num_prompts": _f(t.num_prompts), "result": "NOT RUN"})
    for r in record.media:
        row = {**base, "section": f"media_{r.kind}", "item": r.key, "max_concurrency": r.max_concurrency,
               "num_prompts": _f(r.num_requests), "completed": _f(r.completed), "failed": _f(r.failed),
               "failure_classes": ", ".join(f"{k} {v}" for k, v in sorted(r.failures_by_class.items())),
               "figures": "; ".join(f"{k}={_f(v, 6)}" for k, v in sorted(r.figures.items())),
               "result": "" if r.ran else "NOT RUN"}
        for check in r.tiers:
            row[f"{check.tier}_result"] = _decision(check.decision, check.passed)
        rows.append(row)
    decided = {c.name: c.decision for c in record.verdict.checks}
    for e in record.evals:
        rows.append({**base, "section": "eval", "item": e.task, "metric": e.metric or "",
                     "value": _f(e.value, 4), "ci95_low": _f(e.ci95[0], 4) if e.ci95 else "",
                     "ci95_high": _f(e.ci95[1], 4) if e.ci95 else "", "n": _f(e.samples),
                     "target": _f(e.target, 4), "reference_score": _f(e.reference_score, 4),
                     "ratio_to_reference": _f(e.ratio_to_reference),
                     "published_score": _f(e.published_score, 4),
                     "ratio_to_published": _f(e.ratio_to_published),
                     "result": "ERROR" if e.status == "error" else _decision(
                         decided.get(f"accuracy {e.task}", e.decision), e.passed),
                     "detail": e.error or ""})
    for name, section in (("test", record.tests), ("stress_test", record.stress_tests)):
        for i in section.items:
            rows.append({**base, "section": name, "item": i.name, "result": _b(i.passed),
                         "detail": i.detail or ""})
        rows += [{**base, **row} for row in csv_rows(name, section.tables)]
    for s in record.sections_not_run:
        rows.append({**base, "section": s.section, "item": "*", "result": "NOT RUN",
                     "detail": s.reason})
    rows += _check_rows(record, base) + _pricing_rows(record, base)
    v = record.verdict
    rows.append({**base, "section": "verdict", "item": v.model_status or "", "result": v.result,
                 "detail": "; ".join([f"[{b.category}] {b.item}: {b.detail}" for b in v.blockers]
                                     + [f"[undecided] {c.name}: "
                                        + (f"{c.value} in {c.ci95} vs target {c.target} (n={c.n})"
                                           if c.value is not None else c.detail or "undecided")
                                        for c in v.checks if c.required and c.decision == "inconclusive"])})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
