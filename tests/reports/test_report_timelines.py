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


def _svg_in(html: str, start: str, end: str | None = None) -> list[str]:
    """The server-state plots of the page between two headings."""
    part = html[html.index(start):html.index(end) if end else len(html)]
    return re.findall(r'<svg class="plot" data-plot="server-state".*?</svg>', part, re.S)


def _media_point(run) -> None:
    """A media benchmark point as the media client writes it: rows with send times, the media server's samples."""
    from records.media import MediaPoint, point_file_name
    origin = 800.0
    requests = [{"request_id": f"r{i}", "ms": 120.0 + 15 * i, "status": 200, "error_class": None,
                 "send_time_s": origin + 0.25 * i + 0.01} for i in range(7)]
    requests.append({"request_id": "r7", "ms": 30.0, "status": 503, "error_class": "http_5xx",
                     "send_time_s": origin + 1.9})
    MediaPoint(model_id="m", served_model_name="whisper", kind="speech", endpoint="/v1/audio/transcriptions",
               max_concurrency=2, num_requests=8, completed=7, failed=1, requests=requests,
               figures={"rtf": 0.2, "latency_p50_ms": 165.0},
               server_state={"interval_s": 1.0, "origin_perf_s": origin, "t_s": [0.0, 1.0, 2.0], "samples": 3,
                             "missed": 0, "series": {"queue_depth": [0, 3, 1],
                                                     "mean_batch_size": [None, 2.0, 1.5]}}
               ).write(run.path / "benchmarks" / point_file_name("speech", 2))


def _stress_points(run) -> None:
    """A stress record as run_stress_tests / run_media_stress write it: an LLM load point (vLLM gauges sampled)
    and a media one (queue depth), each with its per-request rows on the client's perf_counter clock."""
    from benchmarking.metrics import RequestRecord
    from records.stress import StressPointRecord, StressRecord
    out = run.path / "stress_tests"
    out.mkdir(parents=True, exist_ok=True)
    points = []
    for name, kind, origin, series in (
            ("single_isl-16_osl-4_con-2_n-6", "text", 300.0,
             {"running": [0, 2, 2, 0], "waiting": [0, 1, 0, 0], "kv_cache_usage_pct": [0.0, 3.0, 4.0, 0.5]}),
            ("single_embedding_con-2_n-6", "embedding", 900.0, {"queue_depth": [0, 4, 2, 0]})):
        rows = []
        for i in range(6):
            rec = RequestRecord(index=i, request_id=f"{name}-{i}", prompt_len=16, requested_output_len=4,
                                send_time=origin + 0.4 * i, success=i != 5, latency=0.1 + 0.01 * i if i != 5 else None,
                                ttft=0.02 + 0.001 * i if i != 5 else None, error_class=None if i != 5 else "http_5xx")
            if kind != "text" and rec.latency is not None:
                rec.ttft = rec.latency  # a media answer comes whole (stress_tests/media_driver.py)
            rows.append(json.dumps(rec.to_json()) + "\n")
        (out / f"{name}.requests.jsonl").write_text("".join(rows))
        points.append(StressPointRecord(
            name=name, mode="single", kind=kind, sent=6, completed=5, failed=1, status="failed", passed=False,
            requests_file=f"stress_tests/{name}.requests.jsonl",
            server_state={"interval_s": 1.0, "origin_perf_s": origin, "t_s": [0.0, 1.0, 2.0, 3.0], "samples": 4,
                          "missed": 0, "series": series}))
    points.append(StressPointRecord(name="multiple_isl-8_osl-4_con-1_n-1", mode="multiple", status="not_run",
                                    passed=False, detail="the workflow's time budget ran out before this point"))
    StressRecord(points=points, status="failed", passed=False, detail="0/3 load points passed").write(
        out / "stress_record.json")


def test_media_and_stress_points_are_plotted_over_the_server_state(make_run):
    run = make_run("benchmarks_only_run")
    _media_point(run)
    _stress_points(run)
    record = build_report(run.path)

    (media,) = [m for m in record.media if m.kind == "speech"]
    t = media.timeline
    assert t is not None and t.name == "speech_con-2"
    assert [r[0] for r in t.requests][:2] == [0.01, 0.26] and len(t.requests) == 8
    assert all(r[1] is None for r in t.requests)                      # no TTFT apart from the whole answer
    assert t.requests[0][2] == 120.0 and t.requests[-1][2] is None    # a failed request has no latency
    assert t.state_series == {"queue_depth": [0, 3, 1], "mean_batch_size": [None, 2.0, 1.5]}

    text, emb = record.stress_tests.timelines                         # the point that never ran has none
    assert text.name == "single_isl-16_osl-4_con-2_n-6" and emb.name == "single_embedding_con-2_n-6"
    assert [r[0] for r in text.requests] == [0.0, 0.4, 0.8, 1.2, 1.6, 2.0]
    assert text.requests[0][1:] == [20.0, 100.0] and text.requests[5][1:] == [None, None]
    assert emb.requests[1] == [0.4, None, 110.0]
    assert text.state_series["waiting"] == [0, 1, 0, 0] and emb.state_series == {"queue_depth": [0, 4, 2, 0]}

    html = render_html(record)
    (media_svg,) = _svg_in(html, "<h2>Media benchmarks", "<h2>Performance targets</h2>")
    for label in ("end-to-end", "queue depth", "mean batch", "seconds since the point started"):
        assert label in media_svg, label
    assert "TTFT" not in media_svg and media_svg.count("<circle") == 7   # the 7 answered requests
    text_svg, emb_svg = _svg_in(html, "<h2>Stress tests</h2>", "<h2>Metadata</h2>")
    assert "Load points over time" in html
    for label in ("TTFT", "end-to-end", "running", "waiting", "KV cache %"):
        assert label in text_svg, label
    assert text_svg.count("<circle") == 10                            # TTFT and end-to-end of 5 answered
    assert "queue depth" in emb_svg and "TTFT" not in emb_svg and emb_svg.count("<circle") == 5

    from records.report import ReportRecord
    again = ReportRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.media[0].timeline.state_series["queue_depth"] == [0, 3, 1]
    assert again.stress_tests.timelines[1].requests == emb.requests
