"""``report.html``: a self-contained page (inline CSS and SVG, no scripts, no network).

The page is rendered from ``templates/report.html.j2`` with autoescaping on; the only
pre-rendered HTML handed to the template is the SVG built by ``plots`` and ``timeline_plots`` (marked
safe there).
"""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from reports import requirements_views
from reports import ab_views, agreement_views, comparison_views, plots, views
from reports import spec_decode_views, timeline_plots
from reports.legend import legend
from reports.media_views import media_tables, target_lines
from records.bench_timeline import PointTimeline
from records.report import ReportRecord

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


def _env() -> Environment:
    return Environment(loader=FileSystemLoader(str(TEMPLATE_DIR)),
                       autoescape=select_autoescape(["html", "j2"]),
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _cls(cell: str) -> str:
    if cell.startswith(("FAIL", "ERROR", "NOT RUN", "NO")) or cell.endswith(": FAIL"):
        return "bad"
    if cell.startswith("PASS") or cell.endswith(": PASS"):
        return "good"
    return ""


def _table(columns, rows) -> dict:
    return {"headers": [h for h, _ in columns],
            "rows": [[(c, _cls(c)) for c in views.cells(columns, r)] for r in rows]}


def _timeline_view(t: PointTimeline) -> dict:
    """One point's timeline as the template shows it (benchmark, media and stress points alike)."""
    return {"name": t.name, "lines": t.lines,
            "state": Markup(timeline_plots.server_state_timeline(t.name, t.requests,
                                                                 {"t_s": t.state_t_s, "series": t.state_series})),
            "rates": Markup(timeline_plots.offered_vs_achieved(t.name, t.rates)) if t.rates else None}


def _spec_decode_view(record: ReportRecord) -> dict | None:
    """The "Speculative decoding" section with its per-position plot marked safe (``reports.spec_decode_views``)."""
    view = spec_decode_views.html_view(record.spec_decode)
    if view is not None:
        view["plot"] = Markup(view["plot"])
    return view


def render_html(record: ReportRecord) -> str:
    m = record.metadata
    not_run = {s.section: s.reason for s in record.sections_not_run}
    context = {
        "r": record,
        "title": f"{m.model_name or m.model_id} on {m.device or 'unknown device'}",
        "verdict_line": views.verdict_line(record),
        "metadata": views.metadata_rows(record),
        "bench": _table(views.benchmark_columns(record), record.benchmarks),
        "pricing": views.pricing_line(record),
        "targets": _table(views.TIER_COLUMNS, views.tier_rows(record)),
        "evals": {"headers": [h for h, _ in views.EVAL_COLUMNS],
                  "rows": [[(c, _cls(c)) for c in row] for row in views.eval_rows(record)]},
        "checks": _table(views.CHECK_COLUMNS, record.verdict.checks),
        "media": [{"kind": t.kind, "title": t.title,
                   "table": {"headers": t.headers, "rows": [[(c, _cls(c)) for c in row] for row in t.rows]},
                   "targets": [line for line in target_lines(record) if line.startswith(f"{t.kind}_")],
                   "plot": Markup(plots.media_latency_plot(record.media, t.kind)),
                   "timelines": [_timeline_view(m.timeline) for m in record.media
                                 if m.kind == t.kind and m.timeline is not None]}
                  for t in media_tables(record)],
        "sections": [("Tests", record.tests, not_run.get("tests")),
                     ("Stress tests", record.stress_tests, not_run.get("stress_tests"))],
        "not_run": not_run,
        "comparison": None if record.comparison is None else {
            "line": comparison_views.header_line(record.comparison),
            "table": {"headers": [h for h, _ in comparison_views.COMPARISON_COLUMNS],
                      "rows": [[(c, "bad" if c == "REGRESSED" else "good" if c == "improved" else "") for c in row]
                               for row in comparison_views.comparison_rows(record.comparison)]},
            "notes": record.comparison.notes,
            "trend": Markup(comparison_views.trend_plot(record.comparison))},
        "agreement": None if not record.agreement else {
            "line": agreement_views.header_line(record.agreement),
            "table": {"headers": [h for h, _ in agreement_views.AGREEMENT_COLUMNS],
                      "rows": [[(c, "bad" if c == "DISAGREE" else "good" if c == "agree" else "") for c in row]
                               for row in agreement_views.agreement_rows(record.agreement)]}},
        "ab": None if record.ab is None else {
            "line": ab_views.header_line(record.ab),
            "table": {"headers": [h for h, _ in ab_views.AB_COLUMNS],
                      "rows": [[(c, "bad" if c == "REGRESSED" else "good" if c in ("improved", "within_noise") else "")
                                for c in row] for row in ab_views.ab_rows(record.ab)]},
            "notes": ab_views.notes(record.ab),
            "plots": [Markup(plots.ab_pairs_plot(r)) for r in record.ab.records]},
        "requirements": None if record.requirements is None else {
            "line": requirements_views.header_line(record.requirements),
            "table": {"headers": list(requirements_views.COLUMNS),
                      "rows": [[(c, {"not met": "bad", "met": "good"}.get(c, "")) for c in row]
                               for row in requirements_views.rows(record.requirements)]},
            "notes": requirements_views.notes(record.requirements)},
        "spec_decode": _spec_decode_view(record),
        "check": views.check,
        "series_plot": lambda t: Markup(plots.endurance_plots(t.series, t.title.split(":")[0])),
        "num": views.num,
        "timelines": [_timeline_view(row.timeline) for row in record.benchmarks if row.timeline is not None],
        "timeline_view": _timeline_view,
        "legend": legend(),
        "plots": {
            "throughput": Markup(plots.throughput_vs_latency(record.benchmarks)),
            "ttft": Markup(plots.distribution_plot(record.benchmarks, "ttft")),
            "tpot": Markup(plots.distribution_plot(record.benchmarks, "tpot")),
            "accuracy": Markup(plots.accuracy_plot(record.evals)),
        },
    }
    return _env().get_template("report.html.j2").render(**context)
