"""A load point's timeline for the report: request times from its rows, the server's samples and its
workload's figures from its record (``records.bench_timeline.PointTimeline``).

Three kinds of point carry the same two things (when each request left, on the client's
``time.perf_counter``; the server's /metrics samples with the ``origin_perf_s`` they count from), so
one function turns any of them into a timeline: a benchmark point (``BenchPoint`` and its request
rows), a media benchmark point (``MediaPoint``: its rows are in the record) and a stress load point
(``StressPointRecord`` and its request rows). Both are put on seconds since the point started (the
sampler's ``origin_perf_s``, or the first send when the server had no samples), so the plot's panels
line up second for second.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from records.bench import BenchPoint
from records.bench_timeline import PointTimeline, workload_lines
from records.media import MediaPoint
from records.stress import StressRecord

MAX_REQUEST_DOTS = 5000  # a longer point is thinned evenly; its summary numbers come from the record


def _rows(path: Path | None) -> list[dict]:
    if path is None or not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


def timeline(name: str, rows: list[dict], state: dict | None, workload: dict | None = None,
             whole_answers: bool = False) -> PointTimeline | None:
    """The timeline of one point from its request rows (``send_time_s``, ``ttft_ms``, ``e2el_ms``) and its
    server samples; None for a point without rows or samples. ``whole_answers``: a media answer comes
    whole, so it has no first-token time apart from its end-to-end latency (left out, not drawn twice)."""
    state = state or {}
    rows = [r for r in rows if not r.get("warmup") and isinstance(r.get("send_time_s"), (int, float))]
    if not rows and not state.get("t_s"):
        return None
    origin = state.get("origin_perf_s")
    if not isinstance(origin, (int, float)):
        origin = min((r["send_time_s"] for r in rows), default=0.0)
    step = max(1, len(rows) // MAX_REQUEST_DOTS)
    requests = [[round(r["send_time_s"] - origin, 4), None if whole_answers else r.get("ttft_ms"), r.get("e2el_ms")]
                for r in rows[::step]]
    w = workload or {}
    return PointTimeline(name=name, workload=w.get("kind"), requests=requests,
                         state_t_s=list(state.get("t_s") or []), state_series=dict(state.get("series") or {}),
                         rates=w.get("rate_over_time"), lines=workload_lines(workload))


def point_timeline(name: str, rec: BenchPoint, requests_path: Path | None) -> PointTimeline | None:
    """The timeline of a benchmark point our client measured."""
    return timeline(name, _rows(requests_path), rec.server_state, rec.workload)


def media_timeline(name: str, point: MediaPoint) -> PointTimeline | None:
    """The timeline of a media benchmark point: its rows are in the record (``ms`` is the end-to-end
    latency, null in the plot when the request failed); points written before rows had send times
    have none."""
    rows = [{"send_time_s": r.get("send_time_s"), "e2el_ms": r.get("ms") if r.get("error_class") is None else None}
            for r in point.requests if isinstance(r, dict)]
    return timeline(name, rows, point.server_state, whole_answers=True)


def stress_timelines(rec: StressRecord | None, resolve: Callable[[str | None], Path | None]) -> list[PointTimeline]:
    """One timeline per measured stress load point (LLM or media), from its rows and samples;
    ``resolve`` turns a record's relative path into a file of the run (None outside it)."""
    out = []
    for p in (rec.points if rec is not None else []):
        t = timeline(p.name, _rows(resolve(p.requests_file)), p.server_state, p.workload,
                     whole_answers=p.kind != "text")
        if t is not None:
            out.append(t)
    return out
