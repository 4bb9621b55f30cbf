"""Release reports: one run directory in; report.json/md/csv/html out; a verdict.

``build_report`` reads a run directory into a typed ``ReportRecord``; every output file is a
rendering of that record, so ``write_reports`` can rebuild all of them from the files alone.
"""
from __future__ import annotations

from pathlib import Path

from reports.builder import BadRunDir, build_report
from records.report import SCHEMA, ReportRecord, SchemaError

REPORT_FILES = ("report.json", "report.md", "summary.csv", "report.html")


def write_reports(record: ReportRecord, run_dir: Path) -> list[str]:
    """Write every report file under ``run_dir/reports``; return paths relative to run_dir."""
    from reports.csv_renderer import render_csv
    from reports.html_renderer import render_html
    from reports.markdown import render_markdown

    out_dir = Path(run_dir) / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    record.write(out_dir / "report.json")
    (out_dir / "report.md").write_text(render_markdown(record), encoding="utf-8")
    (out_dir / "summary.csv").write_text(render_csv(record), encoding="utf-8")
    (out_dir / "report.html").write_text(render_html(record), encoding="utf-8")
    return [f"reports/{name}" for name in REPORT_FILES]


__all__ = ["BadRunDir", "ReportRecord", "SCHEMA", "SchemaError", "build_report",
           "write_reports", "REPORT_FILES"]
