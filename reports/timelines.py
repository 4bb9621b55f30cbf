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
from records.bench_timeline import PointTimeline

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


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def workload_lines(w: dict | None) -> list[str]:
    """The workload's own figures in words (what a reader checks first)."""
    if not w:
        return []
    kind = w.get("kind")
    if kind == "trace":
        late = w.get("lateness_ms") or {}
        rate = w.get("offered_rate_rps")
        return [f"trace {w.get('trace_file')} ({w.get('shape')}): {w.get('requests')} requests over "
                f"{w.get('span_s')} s" + (f" ({rate:.2f} req/s offered)" if rate else "")
                + f", time_scale {w.get('time_scale')}",
                f"lateness behind the trace (n={late.get('n')}): p50 {_ms(late.get('p50'))}, p99 {_ms(late.get('p99'))}, "
                f"max {_ms(late.get('max'))}; {late.get('over_limit')} over {w.get('max_lateness_ms')} ms: "
                + ("the client kept up" if w.get("kept_up") else "THE CLIENT DID NOT KEEP UP")]
    if kind == "multi_turn":
        out = [f"multi_turn: {w.get('conversations')} conversations x {w.get('turns')} turns, think time "
               f"{w.get('think_time_s')} s, {w.get('endpoint')}"]
        for t in w.get("per_turn") or []:
            ttft = t.get("ttft") or {}
            ci = ttft.get("mean_ci95_ms")
            out.append(f"turn {t.get('turn')}: mean TTFT {_ms(ttft.get('mean_ms'))}"
                       + (f" [95% {ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
                       + f" (n={ttft.get('n')}), mean input {t.get('mean_input_tokens')} tokens, failed {t.get('failed')}")
        out += _prefix_line(w.get("prefix_cache"))
        return out
    if kind == "shared_prefix":
        shared, unshared = (w.get(k) or {} for k in ("shared", "unshared"))
        out = [f"shared_prefix: {w.get('prefixes')} prefixes of {w.get('prefix_tokens')} tokens"]
        out += _prefix_line(w.get("prefix_cache"))
        for name, part in (("shared", shared), ("unshared", unshared)):
            ttft = part.get("ttft") or {}
            ci = ttft.get("mean_ci95_ms")
            out.append(f"{name}: mean TTFT {_ms(ttft.get('mean_ms'))}" + (f" [95% {ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
                       + f" (n={ttft.get('n')})")
        if w.get("ttft_ratio_shared_to_unshared") is not None:
            ci = w.get("ttft_ratio_ci95")
            out.append(f"TTFT shared / unshared: {w['ttft_ratio_shared_to_unshared']:.3f}"
                       + (f" [95% {ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
        return out
    return [f"workload {kind}"]


def _prefix_line(pc: dict | None) -> list[str]:
    if not pc:
        return ["prefix cache: the server exposes no prefix-cache counters"]
    rate = pc.get("hit_rate")
    return [f"server prefix-cache hit rate {'-' if rate is None else f'{rate:.1%}'} "
            f"({pc.get('hit_tokens'):.0f} of {pc.get('queried_tokens'):.0f} prompt tokens found)"]


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
