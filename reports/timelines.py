"""A benchmark point's timeline for the report: request times from its rows, the server's samples and
its workload's figures from its record (``records.bench_timeline.PointTimeline``).

The rows' ``send_time_s`` and the samples share the client's clock; both are put on seconds since
the point started (the sampler's ``origin_perf_s``, or the first send when the server had no
samples), so the plot's panels line up second for second.
"""
from __future__ import annotations

import json
from pathlib import Path

from records.bench import BenchPoint
from records.bench_timeline import PointTimeline, workload_lines

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
            if isinstance(row, dict) and not row.get("warmup") and isinstance(row.get("send_time_s"), (int, float)):
                out.append(row)
    return out


def point_timeline(name: str, rec: BenchPoint, requests_path: Path | None) -> PointTimeline | None:
    """The timeline of a point our client measured; None for a point without rows or samples."""
    state = rec.server_state or {}
    rows = _rows(requests_path)
    if not rows and not state.get("t_s"):
        return None
    origin = state.get("origin_perf_s")
    if not isinstance(origin, (int, float)):
        origin = min((r["send_time_s"] for r in rows), default=0.0)
    step = max(1, len(rows) // MAX_REQUEST_DOTS)
    requests = [[round(r["send_time_s"] - origin, 4), r.get("ttft_ms"), r.get("e2el_ms")] for r in rows[::step]]
    w = rec.workload or {}
    return PointTimeline(name=name, workload=w.get("kind"), requests=requests,
                         state_t_s=list(state.get("t_s") or []), state_series=dict(state.get("series") or {}),
                         rates=w.get("rate_over_time"), lines=workload_lines(rec.workload))
