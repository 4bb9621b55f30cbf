"""``history.html``: the releases of the run history over time, drawn from the ``history.json`` document.

Self-contained like report.html (inline CSS and SVG, no scripts, no network), so it opens from an
artifact store or a CI page as it is. Per spec: a table of its releases (each links to its run's
report), then one plot per judged metric: each release's value with its 95% interval, the targets its
checks compared it with, a mark where the regression gate decided a regression (red, pointing up) or an
improvement (green, pointing down), and a dashed line where the host changed: the numbers on either side
of it are of different machines, so a step there is not the build's. Each point links to its run's report.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from reports import plots, units
from reports.plots import MB, ML, MR, MT, W, _t

HEIGHT = 270
GATE_COLOURS = {"regressed": "#d62728", "improved": "#2ca02c"}
TARGET_COLOURS = {"functional": "#8c564b", "complete": "#ff7f0e", "target": "#9467bd"}
STYLE = """
  body { font-family: -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto; max-width: 1240px;
         padding: 0 16px; color: #1b1b1b; background: #fff; }
  h2 { border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
  table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
  th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
  th { background: #f2f2f2; }
  .PASS { color: #11691d; font-weight: 600; } .FAIL { color: #b00020; font-weight: 600; }
  .INCONCLUSIVE { color: #8a6d00; font-weight: 600; }
  .muted { color: #666; } .server.external { color: #8a6d00; font-style: italic; }
  .plots { display: flex; flex-wrap: wrap; gap: 12px; }
  .plots svg { border: 1px solid #e5e5e5; max-width: 100%; height: auto; }
"""


def _series(runs: list[dict[str, Any]]) -> list[str]:
    """The spec's series in first-seen order, judged ones (with intervals) before headline-only ones."""
    seen: dict[str, bool] = {}
    for run in runs:
        for m in run["metrics"]:
            seen[m["series"]] = seen.get(m["series"], False) or m["check"] is not None
    return [s for s in seen if seen[s]] + [s for s in seen if not seen[s]]


def _points(runs: list[dict[str, Any]], series: str) -> list[dict[str, Any] | None]:
    """Per release: the series' value, interval, targets and decisions per tier (None: not measured)."""
    out = []
    for run in runs:
        found = [m for m in run["metrics"] if m["series"] == series]
        if not found:
            out.append(None)
            continue
        first = found[0]
        out.append({"value": first["value"], "ci95": first["ci95"], "n": first["n"], "ci_method": first["ci_method"],
                    "targets": {m["tier"] or "limit": m["target"] for m in found if m["target"] is not None},
                    "decisions": {m["tier"] or "check": m["decision"] for m in found if m["decision"]},
                    "gate": next((g for g in run["gate"] if g["series"] == series), None)})
    return out


def _y_range(points: list[dict[str, Any] | None], scale: float) -> tuple[float, float]:
    values = [v * scale for p in points if p for v in [p["value"], *(p["ci95"] or []), *p["targets"].values()]
              if v is not None and math.isfinite(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    lo = min(lo, 0.0)
    return lo, (hi * 1.15 if hi > 0 else lo + 1.0)


def _x_axis(frame: Any, runs: list[dict[str, Any]]) -> None:
    """Release dates under their points (every k-th when there are many; with the time of day when two
    releases share a date)."""
    step = max(1, math.ceil(len(runs) / 8))
    dates = [(run["started"] or "?")[:10] for run in runs]
    labels = dates if len(set(dates)) == len(dates) else [
        (run["started"] or "?")[5:16].replace("T", " ") for run in runs]
    for i, label in enumerate(labels):
        if i % step == 0 or i == len(runs) - 1:
            frame.parts.append(f'<text x="{_t(frame.sx(i))}" y="{HEIGHT - MB + 16}" text-anchor="middle" '
                               f'font-size="10">{escape(label)}</text>')


def _host_lines(frame: Any, runs: list[dict[str, Any]]) -> None:
    for i, run in enumerate(runs):
        if run["host_changes"]:
            x = _t(frame.sx(i - 0.5))
            frame.parts.append(
                f'<g class="host-change"><title>host changed before {escape(run["run_id"])}: '
                f'{escape("; ".join(run["host_changes"]))}</title><line x1="{x}" x2="{x}" y1="{MT}" '
                f'y2="{HEIGHT - MB}" stroke="#555" stroke-dasharray="5,4"/><text x="{x}" y="{MT - 4}" '
                f'text-anchor="middle" font-size="10" fill="#555">host changed</text></g>')


def _targets(frame: Any, points: list[dict[str, Any] | None], scale: float) -> None:
    """The latest release's targets as dashed lines, named by tier."""
    latest = next((p["targets"] for p in reversed(points) if p and p["targets"]), {})
    for tier, target in latest.items():
        y, colour = _t(frame.sy(target * scale)), TARGET_COLOURS.get(tier, "#777")
        frame.parts.append(f'<line class="target" x1="{ML}" x2="{W - MR}" y1="{y}" y2="{y}" stroke="{colour}" '
                           f'stroke-dasharray="2,3"><title>{escape(tier)} target {target:g}</title></line>'
                           f'<text x="{W - MR - 2}" y="{_t(float(y) - 3)}" text-anchor="end" font-size="9" '
                           f'fill="{colour}">{escape(tier)}</text>')


def _point(frame: Any, run: dict[str, Any], i: int, p: dict[str, Any], unit: units.Unit, scale: float) -> str:
    """One release's value with its interval (a whisker), linked to its report; a gate mark beside it."""
    x, y = frame.sx(i), frame.sy(p["value"] * scale)
    decided = ", ".join(f"{k} {v}" for k, v in p["decisions"].items())
    tip = (f"{run['run_id']} ({run['started'] or '?'}): {units.with_interval(p['value'], p['ci95'], unit)}"
           + (f", n={p['n']}" if p["n"] else "") + (f"; {decided}" if decided else ""))
    parts = []
    if p["ci95"]:
        lo, hi = (frame.sy(v * scale) for v in p["ci95"])
        parts.append(f'<line class="interval" x1="{_t(x)}" x2="{_t(x)}" y1="{_t(lo)}" y2="{_t(hi)}" '
                     f'stroke="#1f77b4" stroke-width="2"/>')
    parts.append(f'<circle cx="{_t(x)}" cy="{_t(y)}" r="4" fill="#1f77b4"><title>{escape(tip)}</title></circle>')
    gate = p["gate"]
    if gate is not None:
        colour, dy = GATE_COLOURS[gate["decision"]], (-1 if gate["decision"] == "regressed" else 1)
        tip = (f"{gate['decision']} against {gate['baseline_run']}: ratio {gate['ratio']} (95% CI "
               f"{gate['ci95'] or 'none'}), tolerance {gate['tolerance']:.0%}")
        ty = y + dy * 12
        parts.append(f'<path class="gate {gate["decision"]}" d="M{_t(x - 6)},{_t(ty - dy * 5)} L{_t(x + 6)},'
                     f'{_t(ty - dy * 5)} L{_t(x)},{_t(ty + dy * 5)} Z" fill="{colour}"><title>{escape(tip)}</title>'
                     f'</path>')
    body = "".join(parts)
    return f'<a href="{escape(run["report"])}">{body}</a>' if run["report"] else body


def series_plot(series: str, runs: list[dict[str, Any]]) -> str:
    """One metric of one spec over its releases (oldest first)."""
    points = _points(runs, series)
    measured = [p for p in points if p]
    unit = units.check_unit(series, next((p["ci_method"] for p in measured if p["ci_method"]), None))
    scale = 100.0 if unit.kind == "share" else 1.0
    frame = plots._Frame("history", series, "release (oldest first)", "%" if scale != 1 else unit.suffix.strip(),
                         (0.0, 1.0), _y_range(points, scale), height=HEIGHT)
    frame.xt, frame.x0, frame.x1 = [], -0.5, len(runs) - 0.5  # releases, not numbers: dated below
    frame.axes()
    _x_axis(frame, runs)
    _host_lines(frame, runs)
    _targets(frame, points, scale)
    line = [(i, p["value"]) for i, p in enumerate(points) if p]
    if len(line) > 1:
        path = " ".join(f"{_t(frame.sx(i))},{_t(frame.sy(v * scale))}" for i, v in line)
        frame.parts.append(f'<polyline points="{path}" fill="none" stroke="#9ecae1" stroke-width="1.5"/>')
    frame.parts += [_point(frame, runs[i], i, p, unit, scale) for i, p in enumerate(points) if p]
    return frame.svg().replace('data-plot="history"', f'data-plot="history" data-series="{escape(series)}"', 1)


def comparison_text(run: dict[str, Any]) -> str:
    """The release's comparison in one cell: what the gate decided ('regressed: ttft_ms <point> x1.40',
    'within noise', 'inconclusive'), whether it failed the verdict, and against which run; '-' when the
    release was compared with nothing."""
    c = run.get("comparison")
    if not c:
        return "-"
    text = c["summary"]
    if c["decisions"].get("regressed"):
        text += " (failed the verdict)" if c["gated"] else f" (on_regression={c['on_regression']}: shown only)"
    return f"{text}; vs {c['baseline_run']}"


def server_text(run: dict[str, Any]) -> str:
    """'local engine-vllm-cpu', 'docker <image>', or 'external' marked as no engine of the spec this run
    started (a stub, a fake or another machine's server: ``history.timeline.run_setup_of``)."""
    server = run.get("server") or "?"
    return f"{server} (not started by the run: a stub or any other server)" if server == "external" else server


def _runs_table(runs: list[dict[str, Any]]) -> str:
    rows = []
    for run in runs:
        commit = run["commit"]
        commits = ", ".join(f"{k} {str(v)[:12]}" for k, v in commit.items() if v and k != "docker_image") or "n/a"
        link = (f'<a href="{escape(run["report"])}">{escape(run["run_id"])}</a>' if run["report"]
                else escape(run["run_id"]))
        host = escape(run["host_fingerprint"]) + (
            f'<br><b>host changed</b>: {escape("; ".join(run["host_changes"]))}' if run["host_changes"] else "")
        server = run.get("server") or "?"
        decided = (run.get("comparison") or {}).get("decisions", {})
        gate_class = "FAIL" if decided.get("regressed") else "PASS" if decided.get("improved") else ""
        rows.append(f'<tr><td>{escape(run["started"] or "?")}</td><td>{link}</td>'
                    f'<td class="{escape(run["verdict"] or "")}">{escape(run["verdict"] or "n/a")}</td>'
                    f'<td>{escape(run.get("mode") or "?")}</td>'
                    f'<td class="server {"external" if server == "external" else ""}">'
                    f'{escape(server_text(run))}</td>'
                    f'<td>{escape(run["spec"]["version"])}</td><td>{escape(commits)}</td><td>{host}</td>'
                    f'<td class="gate-cell {gate_class}">{escape(comparison_text(run))}</td>'
                    f'<td class="muted">{escape(run["note"] or "")}</td></tr>')
    return ('<table class="runs"><tr><th>Started</th><th>Run (report)</th><th>Verdict</th><th>Mode</th>'
            '<th>Server</th><th>Spec version</th><th>Commit</th><th>Host fingerprint</th>'
            '<th>Comparison (regression gate)</th><th>Note</th></tr>' + "".join(rows) + "</table>")


def render_history_html(doc: dict[str, Any]) -> str:
    """The page: filters and store, then one section per spec (its releases' table and metric plots)."""
    by_id = {run["run_id"]: run for run in doc["runs"]}
    shown = ", ".join(f"{k} {v}" for k, v in doc["filters"].items() if v) or "all models and devices"
    out = [('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
           '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
           f"<title>Run history: {escape(shown)}</title>\n<style>{STYLE}</style>\n</head>\n<body>"),
           f"<h1>Run history: {escape(shown)}</h1>",
           (f'<p class="muted">{len(doc["runs"])} release(s) of {len(doc["specs"])} spec(s) from the history store '
           f'{escape(doc["store"])}; generated {escape(doc["generated_at"])}. Points are each release\'s judged '
           "value with its 95% interval (a link to its report); dashed lines are the targets; red marks a "
           "regression and green an improvement the regression gate decided; a dashed vertical line, a host "
           "change. Mode is the run's size (smoke, ci, full: smoke points are a few requests); a server marked "
           "external is one the run did not start (a stub or any other server), not the spec's engine.</p>")]
    if not doc["runs"]:
        out.append("<p>No release in the run history matches.</p>")
    for spec in doc["specs"]:
        runs = [by_id[run_id] for run_id in spec["runs"]]
        out += [(f'<h2 id="{escape(spec["key"])}">{escape(spec["model"])} on {escape(spec["device"])} '
                f'<span class="muted">({escape(spec["impl"])}, {escape(spec["engine"])})</span></h2>'),
                _runs_table(runs), '<div class="plots">']
        out += [series_plot(series, runs) for series in _series(runs)]
        out.append("</div>")
    out.append("</body>\n</html>\n")
    return "\n".join(out)
