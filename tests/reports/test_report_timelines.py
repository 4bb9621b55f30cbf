"""A point's timeline in the report: client latency over the server's sampled state on one time
axis, a trace's offered vs achieved rate, and the workload's figures in words."""
from __future__ import annotations

import json
import re

from records.bench import BenchMetrics, BenchPoint, PointParams
from reports import build_report
from reports.html_renderer import render_html


def _trace_point(run) -> None:
    origin = 5000.0
    rows = [{"index": i, "success": True, "warmup": False, "send_time_s": origin + 0.5 * i + 0.001,
             "ttft_ms": 40.0 + 10 * i, "e2el_ms": 200.0 + 10 * i, "lateness_ms": 1.0, "output_tokens": 4}
            for i in range(6)]
    (run.path / "benchmarks/point_trace_isl-64_osl-4_con-6_n-6.requests.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    point = BenchPoint(
        model_id="m", tool="tt-bench", point=PointParams(isl=64, osl=4, max_concurrency=6, num_prompts=6,
                                                          source="trace"),
        metrics=BenchMetrics(duration=3.0, completed=6, failed=0, mean_ttft_ms=65.0, total_output_tokens=24),
        requests_file="benchmarks/point_trace_isl-64_osl-4_con-6_n-6.requests.jsonl",
        workload={"kind": "trace", "trace_file": "t.jsonl", "shape": "mooncake", "requests": 6, "span_s": 2.5,
                  "time_scale": 1.0, "offered_rate_rps": 2.4, "max_lateness_ms": 50.0, "kept_up": True,
                  "lateness_ms": {"n": 6, "p50": 1.0, "p99": 1.0, "max": 1.0, "over_limit": 0},
                  "rate_over_time": {"bin_s": 1.0, "t_s": [0, 1, 2], "offered_rps": [2, 2, 2],
                                     "sent_rps": [2, 2, 2], "completed_rps": [1, 2, 3]}},
        server_state={"interval_s": 1.0, "origin_perf_s": origin, "t_s": [0.0, 1.0, 2.0, 3.0], "samples": 4,
                      "missed": 0, "series": {"running": [0, 2, 3, 1], "waiting": [0, 1, 0, 0],
                                              "kv_cache_usage_pct": [0.0, 5.0, 7.5, 1.0],
                                              "prefix_cache_hit_rate": [None, 0.5, 0.8, None]}})
    point.write(run.path / "benchmarks/point_trace_isl-64_osl-4_con-6_n-6.json")


def test_timeline_puts_requests_and_server_state_on_one_axis(make_run):
    run = make_run("benchmarks_only_run")
    _trace_point(run)
    record = build_report(run.path)
    trace = next(r for r in record.benchmarks if r.source == "trace")
    t = trace.timeline
    assert t is not None and t.workload == "trace"
    assert [row[0] for row in t.requests] == [0.001, 0.501, 1.001, 1.501, 2.001, 2.501]  # send time - origin
    assert t.state_t_s == [0.0, 1.0, 2.0, 3.0] and t.state_series["waiting"] == [0, 1, 0, 0]
    assert any("the client kept up" in line for line in t.lines)
    # the fixture's older points have no send times and no samples: no timeline, nothing invented
    assert [r.timeline for r in record.benchmarks if r.source != "trace"] == [None, None]

    html = render_html(record)
    state_svg = re.search(r'<svg class="plot" data-plot="server-state".*?</svg>', html, re.S).group(0)
    for label in ("TTFT", "end-to-end", "running", "waiting", "KV cache %", "prefix hits %",
                  "seconds since the point started"):
        assert label in state_svg, label
    assert state_svg.count("<circle") == 12                  # TTFT and end-to-end of every request
    assert 'data-plot="trace-rate"' in html and "offered (trace)" in html
    assert "Benchmark points over time" in html
    from reports.markdown import render_markdown
    md = render_markdown(record)
    assert "Workload of point_trace_isl-64_osl-4_con-6_n-6:" in md and "the client kept up" in md


def test_report_roundtrip_keeps_the_timeline(make_run, tmp_path):
    from records.report import ReportRecord
    run = make_run("benchmarks_only_run")
    _trace_point(run)
    record = build_report(run.path)
    again = ReportRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    trace = next(r for r in again.benchmarks if r.source == "trace")
    assert trace.timeline.rates["completed_rps"] == [1, 2, 3]


def test_a_workload_point_is_never_judged_as_its_shapes_reference_point(make_run):
    run = make_run("benchmarks_only_run")
    before = [t.to_dict() for t in build_report(run.path).targets]
    ref = BenchPoint.read(run.path / "benchmarks/point_isl-128_osl-128_con-4_n-16.json")
    ref.metrics.mean_ttft_ms, ref.workload = 1e6, {"kind": "multi_turn", "per_turn": []}
    ref.requests_file = None
    ref.write(run.path / "benchmarks/point_multi_turn_isl-128_osl-128_con-4_n-16.json")
    record = build_report(run.path)
    assert [t.to_dict() for t in record.targets] == before
    assert sum(1 for r in record.benchmarks if (r.isl, r.max_concurrency) == (128, 4)) == 2
