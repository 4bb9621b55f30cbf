"""Console summary of a report (rich): one table per section, then the verdict on one line.

Printed by the reports workflow so the release's own output ends with the answer; the
orchestrator copies stdout into run.log, so the tables are kept to plain box characters
and no colour when stdout is not a terminal.
"""
from __future__ import annotations

import sys
from typing import TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reports import requirements_views
from reports import ab_views, comparison_views, views
from reports.media_views import media_tables
from records.report import ReportRecord, Section


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left", show_lines=False)
    for h in headers:
        t.add_column(h, overflow="fold")
    for r in rows:
        t.add_row(*[_style(c) for c in r])
    return t


def _style(cell: str) -> str:
    if cell.startswith(("FAIL", "ERROR", "NOT RUN", "NO")) or cell.endswith(": FAIL"):
        return f"[bold red]{escape(cell)}[/]"
    if cell.startswith("PASS") or cell.endswith(": PASS"):
        return f"[green]{escape(cell)}[/]"
    return escape(cell)


def _section(console: Console, title: str, section: Section, reason: str | None) -> None:
    if not section.items:
        console.print(escape(f"{title}: not run ({reason or 'no records'})"))
        return
    console.print(_table(title, ["Name", "Status", "Result", "Detail"],
                         [[i.name, i.status or "n/a", views.check(i.passed), i.detail or ""]
                          for i in section.items]))
    for t in section.tables:  # detail tables from the section's typed records
        console.print(_table(t.title, t.headers, t.rows))


def print_summary(record: ReportRecord, file: TextIO | None = None, width: int = 160) -> None:
    out = file or sys.stdout
    tty = bool(getattr(out, "isatty", lambda: False)())
    # A terminal gets its own width; a pipe (run.log) a fixed one so logs are reproducible.
    console = Console(file=out, width=None if tty else width, highlight=False,
                      soft_wrap=False, force_terminal=tty)
    reasons = {s.section: s.reason for s in record.sections_not_run}
    if record.requirements is not None:
        console.print(_table("Requirements", list(requirements_views.COLUMNS),
                             requirements_views.rows(record.requirements)))
        console.print(requirements_views.header_line(record.requirements))
        for line in requirements_views.notes(record.requirements):
            console.print(f"  {line}")
    console.print(_table("Metadata", ["Field", "Value"],
                         [[k, str(val)] for k, val in views.metadata_rows(record)
                          if k in ("Model", "Device", "Implementation", "Engine", "Status",
                                   "Run id", "Workflow", "Duration (s)", "Docker image")]))
    if record.benchmarks:
        columns = views.benchmark_columns(record)
        console.print(_table("Benchmarks", [h for h, _ in columns],
                             [views.cells(columns, r) for r in record.benchmarks]))
    elif not record.media:
        console.print(escape(f"Benchmarks: not run ({reasons.get('benchmarks', 'no records')})"))
    if views.pricing_line(record):
        console.print(escape(views.pricing_line(record)), soft_wrap=True)
    for media in media_tables(record):
        console.print(_table(f"Media benchmarks: {media.title}", media.headers[:-1], [r[:-1] for r in media.rows]))
    if record.targets:
        cols = views.compact_target_columns(record)
        console.print(_table("Performance targets", [h for h, _ in cols],
                             [views.cells(cols, r) for r in record.targets]))
    if record.evals:
        console.print(_table("Accuracy (evals)", [h for h, _ in views.EVAL_COLUMNS], views.eval_rows(record)))
    else:
        console.print(escape(f"Evals: not run ({reasons.get('evals', 'no records')})"))
    _section(console, "Tests", record.tests, reasons.get("tests"))
    _section(console, "Stress tests", record.stress_tests, reasons.get("stress_tests"))
    v = record.verdict
    if v.blockers:
        console.print(_table("Blockers", ["Category", "Item", "Tier", "Detail"],
                             [[b.category, b.item, b.tier or "", b.detail] for b in v.blockers]))
    if v.waived:
        console.print(_table("Waived", ["Category", "Item", "Tier", "Detail", "Waiver reason"],
                             [[w.category, w.item, w.tier or "", w.detail, w.waiver_reason]
                              for w in v.waived]))
    if v.checks:
        console.print(_table("Checks decided on their 95% interval", [h for h, _ in views.CHECK_COLUMNS],
                             [views.cells(views.CHECK_COLUMNS, c) for c in v.checks]))
    if record.comparison is not None:
        c = record.comparison
        console.print(_table("Comparison with a baseline run", [h for h, _ in comparison_views.COMPARISON_COLUMNS],
                             comparison_views.comparison_rows(c)))
        console.print(escape(comparison_views.header_line(c)), soft_wrap=True)
    if record.ab is not None:
        console.print(_table("A/B", [h for h, _ in ab_views.AB_COLUMNS], ab_views.ab_rows(record.ab)))
        for line in [ab_views.header_line(record.ab)] + ab_views.notes(record.ab):
            console.print(escape(line), soft_wrap=True)
    colour = {"PASS": "bold green", "INCONCLUSIVE": "bold yellow"}.get(v.result, "bold red")
    console.print(f"[{colour}]{escape(views.verdict_line(record))}[/]", soft_wrap=True)
