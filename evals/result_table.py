"""The evals step's console table: one row per task, every judged number with its interval.

Why its own module: the table is the evals client's summary for people; the records it reads are the API.
"""

from __future__ import annotations

from records.evals import EvalRecord


def _stopped(r: EvalRecord) -> str:
    """'72/120 decided' for a sequential task (items scored of the set, why it stopped); '-' for one fixed pass."""
    if r.stopped is None:
        return "-"
    return f"{r.samples}/{r.items_total or '?'} {r.stopped}"


def fmt(v: float | None, nd: int = 4) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def result_table(records: list[EvalRecord]) -> str:
    rows = [("task", "metric", "n", "value", "95% CI", "target", "ratio", "in-process [95% CI]", "serving",
             "stopped", "status")]
    for r in records:
        ratio = r.ratio_to_reference if r.ratio_to_reference is not None else r.ratio_to_published
        ci = "-" if not r.ci95 else f"{r.ci95[0]:.3f}..{r.ci95[1]:.3f}"
        inproc = "-" if r.in_process_score is None else (
            f"{r.in_process_score:.4f}" + (f" [{r.in_process_ci95[0]:.3f}..{r.in_process_ci95[1]:.3f}]"
                                           if r.in_process_ci95 else ""))
        rows.append((r.task, r.metric, "-" if r.samples is None else str(r.samples), fmt(r.value), ci,
                     fmt(r.target), fmt(ratio, 3), inproc, (r.serving_decision or "-").upper(), _stopped(r),
                     r.status.upper()))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    errors = [f"  {r.task}: {r.error}" for r in records if r.error]
    return "\n".join(lines + (["errors:"] + errors if errors else []))
