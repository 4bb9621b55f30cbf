"""``summary.csv``: one flat table for spreadsheets and dashboards.

One row per benchmark point, per eval task, per test/stress record, and a final verdict row.
A ``section`` column says which; columns that do not apply to a row are left empty, so the
file loads into any tool without knowing the report schema.
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
    "mean_e2el_ms", "request_throughput",
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


def render_csv(record: ReportRecord) -> str:
    m = record.metadata
    base = {"model_id": m.model_id, "device": m.device or "", "run_id": m.run_id}
    targets = {t.key: t for t in record.targets}
    rows: list[dict[str, str]] = []
    for r in record.benchmarks:
        row = {**base, "section": "benchmark", "item": r.key, "isl": r.isl, "osl": r.osl,
               "max_concurrency": r.max_concurrency, "num_prompts": r.num_prompts,
               "completed": _f(r.completed), "failed": _f(r.failed),
               "failure_classes": r.failure_text(),
               "mean_ttft_ms": _f(r.mean_ttft_ms), "mean_tpot_ms": _f(r.mean_tpot_ms),
               "tput_user": _f(r.tput_user), "decode_throughput": _f(r.decode_throughput),
               "prefill_throughput": _f(r.prefill_throughput),
               "mean_e2el_ms": _f(r.mean_e2el_ms), "request_throughput": _f(r.request_throughput)}
        target = targets.get(r.key)
        if target is not None:
            for check in target.tiers:
                row[f"{check.tier}_result"] = _b(check.passed)
        rows.append(row)
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
            row[f"{check.tier}_result"] = _b(check.passed)
        rows.append(row)
    for e in record.evals:
        rows.append({**base, "section": "eval", "item": e.task, "metric": e.metric or "",
                     "value": _f(e.value, 4), "ci95_low": _f(e.ci95[0], 4) if e.ci95 else "",
                     "ci95_high": _f(e.ci95[1], 4) if e.ci95 else "", "n": _f(e.samples),
                     "target": _f(e.target, 4), "reference_score": _f(e.reference_score, 4),
                     "ratio_to_reference": _f(e.ratio_to_reference),
                     "published_score": _f(e.published_score, 4),
                     "ratio_to_published": _f(e.ratio_to_published),
                     "result": "ERROR" if e.status == "error" else (e.decision or "").upper() or _b(e.passed),
                     "detail": e.error or ""})
    for name, section in (("test", record.tests), ("stress_test", record.stress_tests)):
        for i in section.items:
            rows.append({**base, "section": name, "item": i.name, "result": _b(i.passed),
                         "detail": i.detail or ""})
        rows += [{**base, **row} for row in csv_rows(name, section.tables)]
    for s in record.sections_not_run:
        rows.append({**base, "section": s.section, "item": "*", "result": "NOT RUN",
                     "detail": s.reason})
    v = record.verdict
    rows.append({**base, "section": "verdict", "item": v.model_status or "", "result": v.result,
                 "detail": "; ".join([f"[{b.category}] {b.item}: {b.detail}" for b in v.blockers]
                                     + [f"[undecided] {c.name}: " + (f"{c.value} in {c.ci95} vs target {c.target} (n={c.n})"
                                                                     if c.value is not None else c.detail or "undecided")
                                        for c in v.checks if c.required and c.decision == "inconclusive"])})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
