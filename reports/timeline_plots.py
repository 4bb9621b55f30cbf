"""Plots over a point's own time axis: client latency above the server's state, and a trace's
offered vs achieved request rate.

Why stacked panels on one axis: a reader looking at a TTFT spike must see, directly below it, what
the server was doing in the same second (requests waiting, KV cache full, prefix hits gone);
side-by-side plots with their own axes make that comparison by eye and by guesswork. Inline SVG
like ``plots`` (no scripts); each plot is ``<svg class="plot" data-plot="...">``.
"""
from __future__ import annotations

from html import escape

from reports.plots import PALETTE, W, _empty, _label, _t, nice_ticks

ML, MR = 70, 110            # wide right margin: the series names sit there
PANEL_H, GAP, TOP, BOTTOM = 150, 26, 34, 44


def _panel(parts: list[str], y_top: float, title: str, xr: tuple[float, float], series: list[tuple[str, list]],
           markers: bool, under: bool = False) -> None:
    """One panel: ``series`` is [(name, [(t, value|None), ...])], drawn as lines (or dots); ``under``
    draws the first line wide and pale, so a series lying exactly on it stays visible."""
    values = [v for _, pts in series for _, v in pts if v is not None]
    yt = nice_ticks(0.0, max(values) * 1.1 if values and max(values) > 0 else 1.0, 4)
    x0, x1 = xr
    y_lo, y_hi = yt[0], yt[-1]
    sx = lambda x: ML + (x - x0) / ((x1 - x0) or 1) * (W - ML - MR)  # noqa: E731
    sy = lambda y: y_top + PANEL_H - (y - y_lo) / ((y_hi - y_lo) or 1) * PANEL_H  # noqa: E731
    for y in yt:
        parts.append(f'<line x1="{ML}" x2="{W - MR}" y1="{_t(sy(y))}" y2="{_t(sy(y))}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{ML - 6}" y="{_t(sy(y) + 4)}" text-anchor="end" font-size="10">{_label(y)}</text>')
    parts.append(f'<line x1="{ML}" x2="{ML}" y1="{y_top}" y2="{y_top + PANEL_H}" stroke="#444"/>')
    parts.append(f'<line x1="{ML}" x2="{W - MR}" y1="{y_top + PANEL_H}" y2="{y_top + PANEL_H}" stroke="#444"/>')
    parts.append(f'<text transform="translate(14,{y_top + PANEL_H / 2}) rotate(-90)" text-anchor="middle" '
                 f'font-size="11">{escape(title)}</text>')
    for i, (name, pts) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        drawn = [(t, v) for t, v in pts if v is not None]
        if markers:
            parts.extend(f'<circle cx="{_t(sx(t))}" cy="{_t(sy(v))}" r="2.5" fill="{colour}" fill-opacity="0.8">'
                         f'<title>{escape(name)} at {t:.2f} s: {v:.1f}</title></circle>' for t, v in drawn)
        elif drawn:
            path = " ".join(f"{_t(sx(t))},{_t(sy(v))}" for t, v in drawn)
            wide = ' stroke-opacity="0.45"' if i == 0 and under else ""
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                         f'stroke-width="{5 if wide else 1.8}"{wide}>'
                         f'<title>{escape(name)}</title></polyline>')
        ly = y_top + 10 + 14 * i
        parts.append(f'<rect x="{W - MR + 8}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{W - MR + 22}" y="{ly}" font-size="10">{escape(name)}</text>')


def _x_axis(parts: list[str], y: float, xr: tuple[float, float], xt: list[float], label: str) -> None:
    x0, x1 = xr
    for x in xt:
        px = ML + (x - x0) / ((x1 - x0) or 1) * (W - ML - MR)
        parts.append(f'<line x1="{_t(px)}" x2="{_t(px)}" y1="{y}" y2="{y + 4}" stroke="#444"/>')
        parts.append(f'<text x="{_t(px)}" y="{y + 16}" text-anchor="middle" font-size="10">{_label(x)}</text>')
    parts.append(f'<text x="{(ML + W - MR) / 2}" y="{y + 32}" text-anchor="middle" font-size="11">'
                 f'{escape(label)}</text>')


# the server-state series, grouped by unit into the panels below the client's latency
STATE_PANELS = (
    ("requests", ("running", "waiting", "queue_depth", "mean_batch_size")),
    ("percent", ("kv_cache_usage_pct", "prefix_cache_hit_pct")),
)
LABELS = {"queue_depth": "queue depth", "mean_batch_size": "mean batch", "kv_cache_usage_pct": "KV cache %",
          "prefix_cache_hit_pct": "prefix hits %"}


def server_state_timeline(name: str, requests: list[tuple[float, float | None, float | None]],
                          state: dict | None) -> str:
    """Client latency per request (TTFT and end-to-end, ms, at the second the request left) above
    the server's sampled state, over seconds since the point started. ``requests``: (t_s, ttft_ms,
    e2el_ms); ``state``: {"t_s": [...], "series": {name: [...]}} (t_s on the same origin). The one
    renderer of every point kind's timeline: benchmark, media benchmark and stress load points."""
    kind, title = "server-state", f"{name}: client latency over server state"
    series = (state or {}).get("series") or {}
    times = (state or {}).get("t_s") or []
    if not requests and not times:
        return _empty(kind, title, "no request rows and no server samples")
    if "prefix_cache_hit_rate" in series:
        series = {**series, "prefix_cache_hit_pct": [None if v is None else v * 100.0
                                                     for v in series["prefix_cache_hit_rate"]]}
    t_end = max([t for t, _, _ in requests] + list(times) + [1.0])
    xt = nice_ticks(0.0, t_end, 6)
    xr = (xt[0], xt[-1])
    latency = [("TTFT", [(t, v) for t, v, _ in requests]), ("end-to-end", [(t, v) for t, _, v in requests])]
    # a series with no value at all is left out (a media answer comes whole: it has no TTFT of its own)
    panels = [("latency (ms)", [s for s in latency if any(v is not None for _, v in s[1])] or latency, True)]
    for unit, names in STATE_PANELS:
        present = [(LABELS.get(n, n), list(zip(times, series[n]))) for n in names if n in series]
        if present:
            panels.append((unit, present, False))
    if len(panels) == 1:
        panels.append(("server", [], False))
    height = TOP + len(panels) * (PANEL_H + GAP) + BOTTOM
    parts: list[str] = []
    for i, (unit, ser, markers) in enumerate(panels):
        _panel(parts, TOP + i * (PANEL_H + GAP), unit, xr, ser, markers)
    if not series:
        parts.append(f'<text x="{ML + 10}" y="{TOP + PANEL_H + GAP + PANEL_H / 2}" font-size="11" fill="#666">'
                     f'the server exposed no state on /metrics</text>')
    _x_axis(parts, TOP + len(panels) * (PANEL_H + GAP) - GAP, xr, xt, "seconds since the point started")
    return (f'<svg class="plot" data-plot="{kind}" role="img" viewBox="0 0 {W} {height}" width="{W}" '
            f'height="{height}" font-family="sans-serif"><title>{escape(title)}</title>'
            f'<rect width="{W}" height="{height}" fill="#fff"/>'
            f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>'
            + "".join(parts) + "</svg>")


def offered_vs_achieved(name: str, rates: dict | None) -> str:
    """A replayed trace's request rate per time bin: offered (the trace), sent and completed."""
    kind, title = "trace-rate", f"{name}: offered vs achieved request rate"
    if not rates or not rates.get("t_s"):
        return _empty(kind, title, "no rate series")
    t = rates["t_s"]
    xt = nice_ticks(0.0, t[-1] + rates.get("bin_s", 1.0), 6)
    ser = [(label, list(zip(t, rates.get(key) or []))) for key, label in
           (("offered_rps", "offered (trace)"), ("sent_rps", "sent"), ("completed_rps", "completed"))]
    parts: list[str] = []
    _panel(parts, TOP, "requests/s", (xt[0], xt[-1]), ser, False, under=True)
    _x_axis(parts, TOP + PANEL_H, (xt[0], xt[-1]), xt,
            f"seconds since the trace started ({rates.get('bin_s', 1):g} s bins)")
    height = TOP + PANEL_H + BOTTOM
    return (f'<svg class="plot" data-plot="{kind}" role="img" viewBox="0 0 {W} {height}" width="{W}" '
            f'height="{height}" font-family="sans-serif"><title>{escape(title)}</title>'
            f'<rect width="{W}" height="{height}" fill="#fff"/>'
            f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>'
            + "".join(parts) + "</svg>")
