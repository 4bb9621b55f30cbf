"""The comparison with a baseline run as every renderer shows it: one table, a header line, and the
trend plot of the headline metrics over the run history (HTML).

Kept apart from ``views``/``plots`` so the comparison's columns and plot live in one place; the
plot reuses ``plots``' frame so it looks like every other plot of the report.
"""
from __future__ import annotations

from html import escape

from records.report import Comparison, ComparisonMetric
from reports import plots, units
from reports.views import Column, num

COMPARISON_COLUMNS: list[Column] = [
    ("Metric", lambda m: m.name),
    ("Baseline", lambda m: units.number(m.baseline, units.unit_of(m.name.split()[-1]), suffix=True)),
    ("Value", lambda m: units.number(m.value, units.unit_of(m.name.split()[-1]), suffix=True)),
    ("Ratio [95% CI]", lambda m: "n/a" if m.ratio is None else (
        f"{m.ratio:.3f}" + (f" [{m.ci95[0]:.3f}, {m.ci95[1]:.3f}]" if m.ci95 else " (no interval)"))),
    ("n / baseline n", lambda m: f"{num(m.n)} / {num(m.baseline_n)}"),
    ("Run-level noise (from)", lambda m: "unknown" if m.run_noise_pct is None else
     f"±{m.run_noise_pct:g}% ({m.noise_source or '?'}" + (f", {m.noise_runs} runs" if m.noise_runs else "") + ")"),
    ("Decision", lambda m: (m.decision.upper() if m.decision == "regressed" else m.decision)
     + (f" (~{m.runs_to_decide} runs each would decide)" if m.decision == "inconclusive" and m.runs_to_decide
        else "")),
]


def comparison_rows(comparison: Comparison) -> list[list[str]]:
    return [[fn(m) for _, fn in COMPARISON_COLUMNS] for m in comparison.metrics]


def header_line(comparison: Comparison) -> str:
    """'Compared with RUN (started ..., asked: last; ...): 2 regressed, 1 improved, 3 within noise; tolerance 5%, on
    regression: fail; same host.'"""
    counts = {d: sum(1 for m in comparison.metrics if m.decision == d)
              for d in ("regressed", "improved", "within_noise", "inconclusive")}
    parts = [f"{n} {d.replace('_', ' ')}" for d, n in counts.items() if n]
    host = "same host" if comparison.same_host else "DIFFERENT HOSTS: " + "; ".join(comparison.host_differences)
    role = ("a gate: undecided means INCONCLUSIVE" if comparison.gate
            else "the release's own comparison with the last run: undecided is advisory")
    return (f"Compared with {comparison.baseline_run} (started {comparison.baseline_started or 'n/a'}, asked: "
            f"{comparison.requested}; {role}): {', '.join(parts) or 'no metric in common'}; tolerance "
            f"{comparison.tolerance:.0%}, on regression: {comparison.on_regression}; {host}.")


def regressed(comparison: Comparison | None) -> list[ComparisonMetric]:
    return [m for m in (comparison.metrics if comparison else []) if m.decision == "regressed"]


def trend_plot(comparison: Comparison) -> str:
    """The headline metrics (per point TTFT and TPOT, ms) of each run in the history, oldest first;
    the x axis is the run's position, this run last."""
    names = sorted({name for point in comparison.trend for name in point.metrics})
    title = "Trend over the run history (same spec and host)"
    if len(comparison.trend) < 2 or not names:
        return plots._empty("trend", title, "fewer than two runs in the history")
    values = [v for point in comparison.trend for v in point.metrics.values()]
    frame = plots._Frame("trend", title, "run (oldest first; this run last)", "ms",
                         (0.0, float(len(comparison.trend) - 1)), (0.0, max(values) * 1.1))
    frame.axes()
    for i, name in enumerate(names):
        colour = plots.PALETTE[i % len(plots.PALETTE)]
        pts = [(x, point.metrics[name]) for x, point in enumerate(comparison.trend) if name in point.metrics]
        frame.parts.append(
            f'<polyline points="{" ".join(f"{frame.sx(x):.1f},{frame.sy(y):.1f}" for x, y in pts)}" fill="none" '
            f'stroke="{colour}" stroke-width="2"><title>{escape(name)}</title></polyline>')
        for x, y in pts:
            run = comparison.trend[x]
            frame.parts.append(f'<circle cx="{frame.sx(x):.1f}" cy="{frame.sy(y):.1f}" r="3" fill="{colour}">'
                               f'<title>{escape(run.run_id)}: {escape(name)} {y:.2f}</title></circle>')
        ly = plots.MT + 6 + 14 * i
        frame.parts.append(f'<rect x="{plots.ML + 10}" y="{ly}" width="10" height="10" fill="{colour}"/>')
        frame.parts.append(f'<text x="{plots.ML + 25}" y="{ly + 9}" font-size="10">{escape(name)}</text>')
    return frame.svg()
