"""Hand-written inline SVG plots for report.html.

No plotting library and no scripts: the HTML must open offline, from an artifact store or an
email attachment, and render identically in any browser. Every plot is an ``<svg class="plot"
data-plot="...">`` so tests (and readers of the DOM) can find it.
"""
from __future__ import annotations

import math
from html import escape

from records.distribution import Distribution
from records.report import BenchmarkRow, EvalRow

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2"]
W, H = 560, 340
ML, MR, MT, MB = 70, 20, 36, 50  # margins: left, right, top, bottom


def _t(x: float) -> str:
    return f"{x:.1f}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (the usual 1-2-5 steps)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, v = [], start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}"
    return f"{v:.3g}"


class _Frame:
    """Linear axes inside a fixed-size SVG; collects elements as strings."""

    def __init__(self, kind: str, title: str, xlabel: str, ylabel: str,
                 xr: tuple[float, float], yr: tuple[float, float], height: int = H) -> None:
        self.kind, self.title, self.h = kind, title, height
        self.xt = nice_ticks(*xr)
        self.yt = nice_ticks(*yr)
        self.x0, self.x1 = self.xt[0], self.xt[-1]
        self.y0, self.y1 = self.yt[0], self.yt[-1]
        self.parts: list[str] = []
        self.xlabel, self.ylabel = xlabel, ylabel

    def sx(self, x: float) -> float:
        return ML + (x - self.x0) / ((self.x1 - self.x0) or 1) * (W - ML - MR)

    def sy(self, y: float) -> float:
        return self.h - MB - (y - self.y0) / ((self.y1 - self.y0) or 1) * (self.h - MT - MB)

    def axes(self, ygrid: bool = True) -> None:
        p = self.parts
        for y in self.yt if ygrid else []:
            p.append(f'<line x1="{ML}" x2="{W - MR}" y1="{_t(self.sy(y))}" y2="{_t(self.sy(y))}" '
                     f'stroke="#e5e5e5"/>')
            p.append(f'<text x="{ML - 6}" y="{_t(self.sy(y) + 4)}" text-anchor="end" '
                     f'font-size="11">{_label(y)}</text>')
        for x in self.xt:
            p.append(f'<line x1="{_t(self.sx(x))}" x2="{_t(self.sx(x))}" y1="{self.h - MB}" '
                     f'y2="{self.h - MB + 4}" stroke="#444"/>')
            p.append(f'<text x="{_t(self.sx(x))}" y="{self.h - MB + 17}" text-anchor="middle" '
                     f'font-size="11">{_label(x)}</text>')
        p.append(f'<line x1="{ML}" x2="{W - MR}" y1="{self.h - MB}" y2="{self.h - MB}" '
                 f'stroke="#444"/>')
        p.append(f'<line x1="{ML}" x2="{ML}" y1="{MT}" y2="{self.h - MB}" stroke="#444"/>')
        p.append(f'<text x="{(ML + W - MR) / 2}" y="{self.h - 10}" text-anchor="middle" '
                 f'font-size="12">{escape(self.xlabel)}</text>')
        if self.ylabel:
            p.append(f'<text transform="translate(16,{(MT + self.h - MB) / 2}) rotate(-90)" '
                     f'text-anchor="middle" font-size="12">{escape(self.ylabel)}</text>')

    def svg(self) -> str:
        return (f'<svg class="plot" data-plot="{escape(self.kind)}" role="img" '
                f'viewBox="0 0 {W} {self.h}" width="{W}" '
                f'height="{self.h}" font-family="sans-serif"><title>{escape(self.title)}</title>'
                f'<rect width="{W}" height="{self.h}" fill="#fff"/>'
                f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14" '
                f'font-weight="bold">{escape(self.title)}</text>'
                + "".join(self.parts) + "</svg>")


def _empty(kind: str, title: str, message: str) -> str:
    return (f'<svg class="plot plot-empty" data-plot="{escape(kind)}" role="img" '
            f'viewBox="0 0 {W} 80" width="{W}" height="80" '
            f'font-family="sans-serif"><title>{escape(title)}</title>'
            f'<rect width="{W}" height="80" fill="#fafafa" stroke="#ddd"/>'
            f'<text x="{W / 2}" y="45" text-anchor="middle" font-size="13" fill="#666">'
            f'{escape(title)}: {escape(message)}</text></svg>')


def _error_bars(f: _Frame, r: BenchmarkRow, colour: str) -> None:
    """A point's 95% intervals (``BenchmarkRow.ci95``) as whiskers: TPOT across, decode throughput up."""
    cx, cy = f.sx(r.mean_tpot_ms), f.sy(r.decode_throughput)
    x_ci, y_ci = r.ci95.get("tpot_ms"), r.ci95.get("decode_throughput")
    if x_ci:
        f.parts.append(f'<line class="interval" x1="{_t(f.sx(x_ci[0]))}" x2="{_t(f.sx(x_ci[1]))}" y1="{_t(cy)}" '
                       f'y2="{_t(cy)}" stroke="{colour}" stroke-width="1.5"/>')
    if y_ci:
        f.parts.append(f'<line class="interval" x1="{_t(cx)}" x2="{_t(cx)}" y1="{_t(f.sy(y_ci[0]))}" '
                       f'y2="{_t(f.sy(y_ci[1]))}" stroke="{colour}" stroke-width="1.5"/>')


def _ci_text(ci: list[float] | None) -> str:
    return f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else " (no interval: fewer than 8 requests)"


def throughput_vs_latency(rows: list[BenchmarkRow]) -> str:
    """Decode throughput against per-token latency, one line per (ISL, OSL), one marker per
    concurrency: the trade-off a concurrency sweep is run to show. Each point carries its 95%
    intervals as whiskers (``BenchmarkRow.ci95``), so two concurrencies whose whiskers overlap are
    not shown apart by more than their samples can tell."""
    kind, title = "throughput-latency", "Decode throughput vs TPOT across concurrency (95% intervals)"
    pts = [r for r in rows if r.mean_tpot_ms is not None and r.decode_throughput is not None]
    if not pts:
        return _empty(kind, title, "no benchmark points with TPOT and throughput")
    xs = [v for r in pts for v in (r.mean_tpot_ms, *r.ci95.get("tpot_ms", []))]
    ys = [v for r in pts for v in (r.decode_throughput, *r.ci95.get("decode_throughput", []))]
    f = _Frame(kind, title, "mean TPOT (ms/token, lower is better)", "decode throughput (t/s)",
               (0.0, max(xs) * 1.08), (0.0, max(ys) * 1.12))
    f.axes()
    groups: dict[tuple[int, int], list[BenchmarkRow]] = {}
    for r in pts:
        groups.setdefault((r.isl, r.osl), []).append(r)
    for i, ((isl, osl), series) in enumerate(sorted(groups.items())):
        colour = PALETTE[i % len(PALETTE)]
        series.sort(key=lambda r: r.max_concurrency)
        if len(series) > 1:
            path = " ".join(f"{_t(f.sx(r.mean_tpot_ms))},{_t(f.sy(r.decode_throughput))}"
                            for r in series)
            f.parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                           f'stroke-width="2"/>')
        for r in series:
            _error_bars(f, r, colour)
            cx, cy = f.sx(r.mean_tpot_ms), f.sy(r.decode_throughput)
            f.parts.append(f'<circle cx="{_t(cx)}" cy="{_t(cy)}" r="4.5" fill="{colour}">'
                           f'<title>ISL {isl} / OSL {osl}, concurrency {r.max_concurrency}: '
                           f'{r.decode_throughput:.1f} t/s{_ci_text(r.ci95.get("decode_throughput"))} at '
                           f'{r.mean_tpot_ms:.1f} ms{_ci_text(r.ci95.get("tpot_ms"))}</title></circle>')
            f.parts.append(f'<text x="{_t(cx + 6)}" y="{_t(cy - 6)}" font-size="10" '
                           f'fill="{colour}">c={r.max_concurrency}</text>')
        ly = MT + 6 + 16 * i
        f.parts.append(f'<rect x="{ML + 10}" y="{ly}" width="12" height="12" fill="{colour}"/>')
        f.parts.append(f'<text x="{ML + 27}" y="{ly + 10}" font-size="11">ISL {isl} / OSL {osl}'
                       f'</text>')
    return f.svg()


def distribution_plot(rows: list[BenchmarkRow], metric: str) -> str:
    """Box plot per benchmark point: box p25-p75, whiskers p5-p95, median bar, mean dot.
    Points without per-request data fall back to the percentiles their record carries."""
    label = {"ttft": "TTFT", "tpot": "TPOT"}[metric]
    kind, title = f"{metric}-distribution", f"{label} distribution per point (ms)"
    dists: list[tuple[BenchmarkRow, Distribution]] = [
        (r, d) for r in rows if (d := getattr(r, f"{metric}_dist")) is not None]
    if not dists:
        return _empty(kind, title, "no per-request or percentile data")
    values = [v for _, d in dists for v in (d.min, d.p5, d.p50, d.p95, d.p99, d.max, d.mean)
              if v is not None]
    row_h = 26
    height = MT + MB + row_h * len(dists) + 10
    f = _Frame(kind, title, f"{label} (ms)", "", (0.0, max(values) * 1.05), (0, 1), height)
    f.axes(ygrid=False)
    for x in f.xt:
        f.parts.append(f'<line x1="{_t(f.sx(x))}" x2="{_t(f.sx(x))}" y1="{MT}" '
                       f'y2="{height - MB}" stroke="#eee"/>')
    for i, (r, d) in enumerate(dists):
        cy = MT + 10 + row_h * i + row_h / 2
        colour = PALETTE[i % len(PALETTE)]
        name = f"{r.isl}/{r.osl} c={r.max_concurrency}"
        f.parts.append(f'<text x="{ML - 6}" y="{_t(cy + 4)}" text-anchor="end" font-size="10">'
                       f'{escape(name)}</text>')
        lo = d.p5 if d.p5 is not None else d.min
        hi = d.p95 if d.p95 is not None else (d.p99 if d.p99 is not None else d.max)
        if lo is not None and hi is not None:
            f.parts.append(f'<line x1="{_t(f.sx(lo))}" x2="{_t(f.sx(hi))}" y1="{_t(cy)}" '
                           f'y2="{_t(cy)}" stroke="{colour}"/>')
        if d.p25 is not None and d.p75 is not None:
            x0, x1 = f.sx(d.p25), f.sx(d.p75)
            f.parts.append(f'<rect x="{_t(x0)}" y="{_t(cy - 8)}" width="{_t(max(x1 - x0, 1))}" '
                           f'height="16" fill="{colour}" fill-opacity="0.35" stroke="{colour}"/>')
        if d.p50 is not None:
            x = f.sx(d.p50)
            f.parts.append(f'<line x1="{_t(x)}" x2="{_t(x)}" y1="{_t(cy - 9)}" y2="{_t(cy + 9)}" '
                           f'stroke="{colour}" stroke-width="2.5"/>')
        if d.mean is not None:
            f.parts.append(f'<circle cx="{_t(f.sx(d.mean))}" cy="{_t(cy)}" r="3" fill="#000">'
                           f'<title>{escape(name)}: mean {d.mean:.2f} ms, '
                           f'{d.count or "?"} requests ({d.source})</title></circle>')
    return f.svg()


def accuracy_plot(evals: list[EvalRow]) -> str:
    """Each task's score as a fraction of its reference (published when no reference), with
    the pass line at 1 - tolerance."""
    kind, title = "accuracy", "Accuracy relative to reference"
    rows = []
    for e in evals:
        ratio, basis = e.ratio_to_reference, "reference"
        if ratio is None and e.ratio_to_published is not None:
            ratio, basis = e.ratio_to_published, "published"
        if ratio is None and e.value is not None:
            ref = e.reference_score or e.published_score
            if ref:
                ratio, basis = e.value / ref, "reference" if e.reference_score else "published"
        rows.append((e, ratio, basis))
    if not any(r is not None for _, r, _ in rows):
        return _empty(kind, title, "no eval scores with a reference")
    row_h = 28
    height = MT + MB + row_h * len(rows) + 10
    top = max([1.2] + [r for _, r, _ in rows if r is not None]) * 1.05
    f = _Frame(kind, title, "score / reference (1.0 = matches reference)", "", (0.0, top),
               (0, 1), height)
    f.axes(ygrid=False)
    for i, (e, r, basis) in enumerate(rows):
        cy = MT + 10 + row_h * i + row_h / 2
        f.parts.append(f'<text x="{ML - 6}" y="{_t(cy + 4)}" text-anchor="end" font-size="10">'
                       f'{escape(e.task[:14])}</text>')
        if r is None:
            f.parts.append(f'<text x="{ML + 6}" y="{_t(cy + 4)}" font-size="11" fill="#a00">'
                           + (f'{escape(e.status)}: score {e.value:.4g}, no usable reference'
                              if e.value is not None else f'{escape(e.status)}: no score')
                           + '</text>')
            continue
        colour = "#2ca02c" if e.passed else ("#d62728" if e.passed is False else "#888")
        f.parts.append(f'<rect x="{ML}" y="{_t(cy - 9)}" width="{_t(f.sx(r) - ML)}" height="18" '
                       f'fill="{colour}"><title>{escape(e.task)}: {e.value} vs {basis} '
                       f'({r:.3f})</title></rect>')
        f.parts.append(f'<text x="{_t(f.sx(r) + 4)}" y="{_t(cy + 4)}" font-size="10">'
                       f'{r:.3f} of {basis}</text>')
        tol = e.tolerance if e.tolerance is not None else 0.05
        x = f.sx(1 - tol)
        f.parts.append(f'<line x1="{_t(x)}" x2="{_t(x)}" y1="{_t(cy - 12)}" y2="{_t(cy + 12)}" '
                       f'stroke="#000" stroke-dasharray="3,2"/>')
    x1 = f.sx(1.0)
    f.parts.append(f'<line x1="{_t(x1)}" x2="{_t(x1)}" y1="{MT}" y2="{height - MB}" '
                   f'stroke="#444"/>')
    return f.svg()


def media_latency_plot(rows: list, kind: str) -> str:
    """Median and p95 latency of a media kind's points against concurrency: where queueing starts."""
    plot_kind, title = f"media-{kind}", f"{kind}: latency vs concurrency"
    pts = sorted((r for r in rows if r.kind == kind and r.ran and r.latency_p50_ms is not None),
                 key=lambda r: r.max_concurrency)
    if not pts:
        return _empty(plot_kind, title, "no measured points")
    top = max((r.latency_p95_ms or r.latency_p50_ms) for r in pts)
    f = _Frame(plot_kind, title, "concurrency", "latency (ms)",
               (0.0, max(r.max_concurrency for r in pts) * 1.1), (0.0, top * 1.12))
    f.axes()
    for i, (name, label) in enumerate((("latency_p50_ms", "p50"), ("latency_p95_ms", "p95"))):
        colour = PALETTE[i % len(PALETTE)]
        series = [(r.max_concurrency, getattr(r, name)) for r in pts if getattr(r, name) is not None]
        if len(series) > 1:
            f.parts.append(f'<polyline points="{" ".join(f"{_t(f.sx(x))},{_t(f.sy(y))}" for x, y in series)}" '
                           f'fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in series:
            f.parts.append(f'<circle cx="{_t(f.sx(x))}" cy="{_t(f.sy(y))}" r="4.5" fill="{colour}">'
                           f'<title>{label} at concurrency {x}: {y:.1f} ms</title></circle>')
        ly = MT + 6 + 16 * i
        f.parts.append(f'<rect x="{ML + 10}" y="{ly}" width="12" height="12" fill="{colour}"/>')
        f.parts.append(f'<text x="{ML + 27}" y="{ly + 10}" font-size="11">{label}</text>')
    return f.svg()


def endurance_plots(series: dict, title: str) -> str:
    """Two plots of a timed load's windows: p50/p99 end-to-end latency over time, and server memory."""
    t = series.get("t_s") or []
    out = []
    for kind, label, names, ylabel in (("endurance-latency", "latency per window", ("p50_ms", "p99_ms"), "ms"),
                                       ("endurance-memory", "server memory", ("memory_mb",), "MB")):
        plot_title = f"{title}: {label}"
        lines = [(name, [(x, y) for x, y in zip(t, series.get(name) or []) if x is not None and y is not None])
                 for name in names]
        lines = [(name, pts) for name, pts in lines if pts]
        if not lines:
            out.append(_empty(kind, plot_title, "no samples"))
            continue
        xs = [x for _, pts in lines for x, _ in pts]
        ys = [y for _, pts in lines for _, y in pts]
        low = 0.0 if kind == "endurance-latency" else min(ys) * 0.98
        f = _Frame(kind, plot_title, "seconds into the load", ylabel, (0.0, max(xs)), (low, max(ys) * 1.05))
        f.axes()
        for i, (name, pts) in enumerate(lines):
            colour = PALETTE[i % len(PALETTE)]
            f.parts.append(f'<polyline points="{" ".join(f"{_t(f.sx(x))},{_t(f.sy(y))}" for x, y in pts)}" '
                           f'fill="none" stroke="{colour}" stroke-width="2"><title>{escape(name)}</title></polyline>')
            ly = MT + 6 + 16 * i
            f.parts.append(f'<rect x="{ML + 10}" y="{ly}" width="12" height="12" fill="{colour}"/>')
            label = {"p50_ms": "p50 e2e latency", "p99_ms": "p99 e2e latency",
                     "memory_mb": "server memory"}.get(name, name)
            f.parts.append(f'<text x="{ML + 27}" y="{ly + 10}" font-size="11">{escape(label)}</text>')
        out.append(f.svg())
    return "".join(out)


def ab_pairs_plot(record) -> str:
    """An A/B point's paired blocks (``records.ab.ABRecord``): per pair of adjacent blocks the ratio candidate /
    baseline of each metric, against the tolerance band: how the decision's interval was made, pair by pair
    (a drift of the host would show as a trend in both servers' blocks, not in these ratios)."""
    from records.agreement import METRICS, log_ratios

    kind, title = f"ab-{record.point}", f"A/B {record.point}: candidate / baseline per pair of blocks"
    sides = [b.side for b in record.blocks]
    series = {m: [math.exp(x) for x in log_ratios(sides, [b.values.get(m) for b in record.blocks])] for m in METRICS}
    if not any(series.values()):
        return _empty(kind, title, "no pair of blocks measured")
    values = [v for vs in series.values() for v in vs] + [1 - record.tolerance, 1 + record.tolerance]
    pairs = max(len(vs) for vs in series.values())
    f = _Frame(kind, title, "pair of blocks (ABBA order)", "ratio candidate / baseline",
               (0.5, pairs + 0.5), (min(values) * 0.97, max(values) * 1.03))
    f.axes()
    for edge in (1 - record.tolerance, 1.0, 1 + record.tolerance):
        f.parts.append(f'<line class="band" x1="{ML}" x2="{W - MR}" y1="{_t(f.sy(edge))}" y2="{_t(f.sy(edge))}" '
                       f'stroke="#888" stroke-dasharray="{"" if edge == 1.0 else "4 3"}"/>')
    for i, (metric, ratios) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        points = [(k + 1, r) for k, r in enumerate(ratios)]
        if len(points) > 1:
            f.parts.append(f'<polyline points="{" ".join(f"{_t(f.sx(x))},{_t(f.sy(y))}" for x, y in points)}" '
                           f'fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for x, y in points:
            f.parts.append(f'<circle cx="{_t(f.sx(x))}" cy="{_t(f.sy(y))}" r="4" fill="{colour}">'
                           f'<title>{metric}, pair {x}: {y:.3f}</title></circle>')
        ly = MT + 6 + 16 * i
        f.parts.append(f'<rect x="{ML + 10}" y="{ly}" width="12" height="12" fill="{colour}"/>')
        f.parts.append(f'<text x="{ML + 27}" y="{ly + 10}" font-size="11">{escape(metric)}</text>')
    return f.svg()
