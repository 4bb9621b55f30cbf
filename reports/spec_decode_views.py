"""The "Speculative decoding" section as every renderer shows it, its reading and its per-position plot.

Why a section of its own: a speculating server's latencies mean little without its acceptance (how many drafted
tokens survived verification, position by position) and without the answer to "did it pay": the A/B of the
same spec with and without speculation, TPOT and output throughput each decided faster / slower / same /
inconclusive (``records.spec_decode.SPEEDUP_RULE``). The section appears only when some point's server
speculated (its point record carries ``spec_decode``).
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from contracts.typed_record import RecordError
from records.ab import ABSection
from records.bench import BenchPoint, point_key
from records.spec_decode import (
    SPEEDUP_METRICS,
    SpecDecode,
    SpecDecodePoint,
    SpecDecodeSection,
    Speedup,
    speedup_decision,
)

POINT_HEADERS = ["Point", "Dataset", "Drafts", "Accepted / drafted", "Acceptance [95% CI]",
                 "Mean accepted length [95% CI]", "Per position: acceptance [95% CI]"]
SPEEDUP_HEADERS = ["Point", "Dataset", "Metric", "Without speculation", "With speculation",
                   "Ratio with/without [95% CI]", "Decision"]


def read_spec_decode_section(run_dir: Path, ab: ABSection | None) -> SpecDecodeSection | None:
    """Every point record's ``spec_decode`` and, with an A/B, the speedup decisions; None when no point's server
    speculated. A point file that cannot be read is left to the benchmarks table, which names it."""
    section = SpecDecodeSection()
    datasets: dict[str, str] = {}
    for path in sorted((Path(run_dir) / "benchmarks").glob("point_*.json")):
        if "." in path.stem:
            continue
        try:
            rec = BenchPoint.read(path)
        except (RecordError, OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if rec.spec_decode is None:
            continue
        key = point_key(rec.point.isl, rec.point.osl, rec.point.max_concurrency)
        dataset = rec.point.dataset or "random"
        datasets[key] = dataset
        section.points.append(SpecDecodePoint(point=key, dataset=dataset, spec_decode=rec.spec_decode))
        if rec.spec_decode.status != "measured":
            section.notes.append(f"{key}: {rec.spec_decode.detail}")
    if not section.points:
        return None
    if ab is None:
        section.notes.append("no A/B: whether speculation pays is not decided (run again with --baseline-vllm-args "
                             "'{\"speculative_config\": null}' --local-server)")
    else:
        section.speedup = _speedup(ab, datasets)
        if not section.speedup:
            section.notes.append("the A/B decided no TPOT or output throughput (see the A/B section)")
    return section


def _speedup(ab: ABSection, datasets: dict[str, str]) -> list[Speedup]:
    out = []
    for record in ab.records:
        for m in record.metrics:
            if m.metric not in SPEEDUP_METRICS:
                continue
            out.append(Speedup(point=m.point, dataset=datasets.get(m.point, "random"), metric=m.metric,
                               without=m.baseline, with_speculation=m.candidate, ratio=m.ratio, ci95=m.ci95,
                               tolerance=m.tolerance, decision=speedup_decision(m.decision, m.ci95, m.tolerance)))
    return out


def _ci(ci: list[float] | None, spec: str) -> str:
    return "" if ci is None else f" [{format(ci[0], spec)}, {format(ci[1], spec)}]"


def point_row(p: SpecDecodePoint) -> list[str]:
    s: SpecDecode = p.spec_decode
    if s.status != "measured":
        return [p.point, p.dataset, str(s.drafts), "n/a", s.status, "n/a", s.detail]
    positions = "; ".join(f"{q.position}: {q.rate:.2f}{_ci(q.ci95, '.2f')}"
                          for q in s.per_position if q.rate is not None)
    return [p.point, p.dataset, str(s.drafts), f"{s.accepted_tokens} / {s.draft_tokens}",
            f"{s.acceptance_rate:.3f}{_ci(s.acceptance_rate_ci95, '.3f')}",
            f"{s.mean_accepted_length:.2f}{_ci(s.mean_accepted_length_ci95, '.2f')}", positions or "n/a"]


def speedup_row(u: Speedup) -> list[str]:
    num = lambda v: "n/a" if v is None else f"{v:.4g}"  # noqa: E731
    ratio = "n/a" if u.ratio is None else f"{u.ratio:.3f}" + (_ci(u.ci95, ".3f") or " (no interval)")
    return [u.point, u.dataset, u.metric, num(u.without), num(u.with_speculation), ratio, u.decision]


def header_line(section: SpecDecodeSection) -> str:
    """'3 point(s) speculated; acceptance 0.41-0.93. Speedup: 2 faster, 2 inconclusive. Intervals: ...'."""
    rates = [p.spec_decode.acceptance_rate for p in section.points if p.spec_decode.acceptance_rate is not None]
    span = f"; acceptance {min(rates):.2f}-{max(rates):.2f}" if rates else ""
    words = [u.decision for u in section.speedup]
    decided = ", ".join(f"{words.count(w)} {w}" for w in ("faster", "slower", "same", "inconclusive") if w in words)
    speed = f" With speculation against without (TPOT, output throughput): {decided}." if decided else ""
    return (f"{len(section.points)} point(s) speculated{span}.{speed} Intervals: {section.method}."
            + (f" Speedup rule: {section.rule}." if section.speedup else ""))


def markdown_lines(section: SpecDecodeSection | None, table) -> list[str]:
    """The section in Markdown (``table``: the renderer's table function)."""
    if section is None:
        return []
    out = ["## Speculative decoding", "", header_line(section), "",
           table(POINT_HEADERS, [point_row(p) for p in section.points]), ""]
    if section.speedup:
        out += [table(SPEEDUP_HEADERS, [speedup_row(u) for u in section.speedup]), ""]
    out += [f"- {n}" for n in section.notes] + ([""] if section.notes else [])
    return out


def position_plot(section: SpecDecodeSection) -> str:
    """Acceptance per draft position with its 95% interval, one line per point: where in the draft the n-gram
    guess stops matching."""
    from reports.plots import MT, ML, PALETTE, _empty, _Frame, _t

    kind, title = "spec-decode-positions", "Acceptance per draft position (95% intervals)"
    series = [(f"{p.point} {p.dataset}", [q for q in p.spec_decode.per_position if q.rate is not None])
              for p in section.points]
    series = [(name, qs) for name, qs in series if qs]
    if not series:
        return _empty(kind, title, "no point drafted")
    last = max(q.position for _, qs in series for q in qs)
    f = _Frame(kind, title, "draft position (0 = first drafted token)", "acceptance (share of drafts)",
               (-0.5, last + 0.5), (0.0, 1.0))
    f.axes()
    for i, (name, qs) in enumerate(series):
        colour, shift = PALETTE[i % len(PALETTE)], (i - (len(series) - 1) / 2) * 0.08
        pts = [(q.position + shift, q.rate) for q in qs]
        f.parts.append(f'<polyline points="{" ".join(f"{_t(f.sx(x))},{_t(f.sy(y))}" for x, y in pts)}" '
                       f'fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for q, (x, y) in zip(qs, pts):
            if q.ci95:
                f.parts.append(f'<line x1="{_t(f.sx(x))}" x2="{_t(f.sx(x))}" y1="{_t(f.sy(q.ci95[0]))}" '
                               f'y2="{_t(f.sy(q.ci95[1]))}" stroke="{colour}"/>')
            f.parts.append(f'<circle cx="{_t(f.sx(x))}" cy="{_t(f.sy(y))}" r="4" fill="{colour}">'
                           f'<title>{escape(name)}, position {q.position}: {y:.3f}{_ci(q.ci95, ".3f")}</title>'
                           f'</circle>')
        ly = MT + 6 + 16 * i
        f.parts.append(f'<rect x="{ML + 10}" y="{ly}" width="12" height="12" fill="{colour}"/>')
        f.parts.append(f'<text x="{ML + 27}" y="{ly + 10}" font-size="11">{escape(name)}</text>')
    return f.svg()


def html_view(section: SpecDecodeSection | None) -> dict | None:
    """What the HTML template shows (the plot's SVG still to be marked safe by the renderer)."""
    if section is None:
        return None
    return {"line": header_line(section),
            "points": {"headers": POINT_HEADERS, "rows": [point_row(p) for p in section.points]},
            "speedup": {"headers": SPEEDUP_HEADERS, "rows": [speedup_row(u) for u in section.speedup]},
            "notes": section.notes, "plot": position_plot(section)}
