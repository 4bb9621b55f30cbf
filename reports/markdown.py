"""``report.md``: the release report a model owner reads in a PR or on GitHub."""
from __future__ import annotations

from reports import requirements_views, spec_decode_views
from reports import ab_views, agreement_views, comparison_views, views
from reports.legend import legend
from reports.media_views import cost_notes, media_tables, sampling_notes, target_lines
from records.report import ReportRecord, Section
from reports.section_tables import markdown_lines


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(_escape(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _not_run_reason(record: ReportRecord, section: str) -> str | None:
    return next((s.reason for s in record.sections_not_run if s.section == section), None)


def _section_items(title: str, name: str, section: Section, record: ReportRecord) -> list[str]:
    out = [f"## {title}", ""]
    if not section.ran and not section.items:
        out += [f"Not run ({_not_run_reason(record, name) or 'no records'}).", ""]
        return out
    passed = sum(1 for i in section.items if i.passed is True)
    failed = sum(1 for i in section.items if i.passed is False)
    out += [f"{len(section.items)} record(s): {passed} passed, {failed} failed.", ""]
    out += [table(["Name", "Status", "Result", "Detail", "Record"],
                  [[i.name, i.status or "n/a", views.check(i.passed), i.detail or "",
                    i.record_file or ""] for i in section.items]), ""]
    out += markdown_lines(section.tables, table)
    for t in (t for t in section.timelines if t.lines):  # a workload's figures in words (plots: HTML only)
        out += [f"Workload of {t.name}:", ""] + [f"- {line}" for line in t.lines] + [""]
    return out


def render_markdown(record: ReportRecord) -> str:
    m = record.metadata
    title = f"{m.model_name or m.model_id} on {m.device or 'unknown device'}"
    out = [f"# Release report: {title}", "", f"**{views.verdict_line(record)}**", ""]
    out += _requirements_lines(record)
    out += _verdict_lines(record)
    out += _comparison_lines(record)
    out += _agreement_lines(record)
    out += _ab_lines(record)
    out += spec_decode_views.markdown_lines(record.spec_decode, table)
    out += _metadata_lines(record)
    out += _benchmark_lines(record)
    out += _performance_target_lines(record)
    out += _media_lines(record)
    out += _eval_lines(record)
    out += _section_items("Tests", "tests", record.tests, record)
    out += _section_items("Stress tests", "stress_tests", record.stress_tests, record)
    out += ["## Legend", ""]
    out += [f"- **{label}**: {text}" for _, label, text in legend()]
    out.append("")
    return "\n".join(out)


def _requirements_lines(record: ReportRecord) -> list[str]:
    """The "Requirements" table first: a customer's document is what the run was asked to show."""
    section = record.requirements
    if section is None:
        return []
    out = ["## Requirements", "", requirements_views.header_line(section), "",
           table(list(requirements_views.COLUMNS), requirements_views.rows(section)), ""]
    out += [f"- {line}" for line in requirements_views.notes(section)]
    return out + ([""] if requirements_views.notes(section) else [])


def _verdict_lines(record: ReportRecord) -> list[str]:
    """Blockers, the checks decided on an interval, waivers, sections not run and the verdict's notes."""
    v = record.verdict
    out = ["## Verdict", ""]
    if v.blockers:
        out += ["Blockers:", ""]
        out += [f"- [{b.category}] {b.item}{f' ({b.tier})' if b.tier else ''}: {b.detail}"
                for b in v.blockers]
        out.append("")
    else:
        out += ["No blockers.", ""]
    if v.checks:
        out += ["Checks decided on their 95% interval:", "",
                table([h for h, _ in views.CHECK_COLUMNS], [views.cells(views.CHECK_COLUMNS, c) for c in v.checks]),
                ""]
    if v.waived:
        out += ["Waived (known issues):", ""]
        out += [f"- [{w.category}] {w.item}{f' ({w.tier})' if w.tier else ''}: {w.detail} "
                f"- waived: {w.waiver_reason}" for w in v.waived]
        out.append("")
    if record.sections_not_run:
        out += ["Sections not run:", ""]
        out += [f"- {s.section}: {s.reason}" for s in record.sections_not_run]
        out.append("")
    if v.notes:
        out += ["Notes:", ""] + [f"- {n}" for n in v.notes] + [""]
    return out


def _comparison_lines(record: ReportRecord) -> list[str]:
    if record.comparison is None:
        return []
    c = record.comparison
    out = ["## Comparison with a baseline run", "", comparison_views.header_line(c), "",
           table([h for h, _ in comparison_views.COMPARISON_COLUMNS], comparison_views.comparison_rows(c)), ""]
    out += [f"- {n}" for n in c.notes] + ([""] if c.notes else [])
    return out


def _agreement_lines(record: ReportRecord) -> list[str]:
    if not record.agreement:
        return []
    return ["## Tools agree", "", agreement_views.header_line(record.agreement), "",
            table([h for h, _ in agreement_views.AGREEMENT_COLUMNS], agreement_views.agreement_rows(record.agreement)),
            ""]


def _ab_lines(record: ReportRecord) -> list[str]:
    if record.ab is None:
        return []
    out = ["## A/B", "", ab_views.header_line(record.ab), "",
           table([h for h, _ in ab_views.AB_COLUMNS], ab_views.ab_rows(record.ab)), ""]
    notes = ab_views.notes(record.ab)
    return out + [f"- {n}" for n in notes] + ([""] if notes else [])


def _metadata_lines(record: ReportRecord) -> list[str]:
    m = record.metadata
    out = ["## Metadata", "", table(["Field", "Value"],
                                    [[k, val] for k, val in views.metadata_rows(record)]), ""]
    if m.steps:
        out += ["Run steps:", "", table(
            ["Step", "Status", "Duration (s)", "Detail"],
            [[s.name, s.status, views.num(s.duration_s), s.detail or ""] for s in m.steps]), ""]
    return out


def _benchmark_lines(record: ReportRecord) -> list[str]:
    out = ["## Benchmarks", ""]
    if record.benchmarks:
        columns = views.benchmark_columns(record)
        out += [table([h for h, _ in columns], [views.cells(columns, r) for r in record.benchmarks]), ""]
        cost_lines = sorted({r.cost_note for r in record.benchmarks if r.cost_note})
        if cost_lines:
            out += ["Cost (server core-seconds, energy): " + " | ".join(cost_lines), ""]
        reconciled = views.reconciliation_lines(record)
        if reconciled:
            out += ["Reconciliation (the server's counters over each point against what its client sent):", ""] \
                + [f"- {line}" for line in reconciled] + [""]
        for t in (r.timeline for r in record.benchmarks if r.timeline is not None and r.timeline.lines):
            out += [f"Workload of {t.name}:", ""] + [f"- {line}" for line in t.lines] + [""]
    else:
        out += [f"Not run ({_not_run_reason(record, 'benchmarks') or 'no benchmark records'}).",
                ""]
    out += [views.pricing_line(record), ""] if views.pricing_line(record) else []
    return out


def _performance_target_lines(record: ReportRecord) -> list[str]:
    v = record.verdict
    out = ["## Performance targets", ""]
    if record.targets:
        cols = views.TIER_COLUMNS
        out += [f"Required tiers for status {v.model_status or 'n/a'}: "
                f"{', '.join(v.required_tiers) or 'none'}.", "",
                table([h for h, _ in cols],
                      [views.cells(cols, p) for p in views.tier_rows(record)]), ""]
    else:
        out += ["The model spec defines no performance reference for this device.", ""]
    return out


def _media_lines(record: ReportRecord) -> list[str]:
    """One section per media kind: its table, then its targets, sample sizes and cost, each when it has any."""
    out: list[str] = []
    for media in media_tables(record):
        out += [f"## Media benchmarks: {media.title}", "", table(media.headers, media.rows), ""]
        lines = [line for line in target_lines(record) if line.startswith(f"{media.kind}_")]
        if lines:
            out += ["Targets:", ""] + [f"- {line}" for line in lines] + [""]
        sampled = [line for line in sampling_notes(record) if line.startswith(f"{media.kind}_")]
        if sampled:
            out += ["Sample size (adaptive: rounds until each required target is decided):", ""] + [
                f"- {line}" for line in sampled] + [""]
        notes = [line for line in cost_notes(record) if line.startswith(f"{media.kind}_")]
        if notes:
            out += ["Cost (server core-seconds, energy):", ""] + [f"- {line}" for line in notes] + [""]
    return out


def _eval_lines(record: ReportRecord) -> list[str]:
    out = ["## Accuracy (evals)", ""]
    if record.evals:
        out += [table([h for h, _ in views.EVAL_COLUMNS], views.eval_rows(record)), ""]
        errors = [e for e in record.evals if e.error]
        out += [f"- {e.task}: {e.error}" for e in errors]
        if errors:
            out.append("")
        serving = [e for e in record.evals if e.serving_decision]
        out += [f"- {e.task}, served vs in-process ({e.serving_decision}): {e.serving_detail}; measured "
                f"{e.in_process_source}" for e in serving]
        if serving:
            out.append("")
    else:
        out += [f"Not run ({_not_run_reason(record, 'evals') or 'no eval records'}).", ""]
    return out
