"""A benchmarks workload run as a stress point (stress_tests/workload.py) against the benchmark stub:
a trace replayed at its timestamps and judged (a client that cannot keep up fails), conversations and
shared prefixes with their figures, bad input refused before anything is sent, and the report's plot
of each load point's latency over the server's samples."""
from __future__ import annotations

import json
import random
import re

import pytest

from records.stress import StressRecord
from tests.helpers import write_model_spec
from tests.stress_tests.test_stress_workflow import run_stress, stub  # noqa: F401 - stub is a fixture

SPEC_EXTRA = {"device_model_spec": {"max_context": 2048, "max_concurrency": 4, "perf_reference": []}}


def _trace(tmp_path, n: int = 12, gap_ms: int = 50, first_isl: int = 8):
    path = tmp_path / "hand.trace.csv"
    path.write_text("timestamp,input_tokens,output_tokens\n"
                    + "".join(f"{gap_ms * i},{first_isl + i},{2 + i % 2}\n" for i in range(n)))
    return path


def _records(run_dir) -> StressRecord:
    return StressRecord.read(run_dir / "stress_tests" / "stress_record.json")


def test_a_trace_replays_as_a_judged_stress_point_and_is_plotted(stub, tmp_path):  # noqa: F811
    url, _ = stub("--ttft-ms", "5", "--itl-ms", "1")
    trace = _trace(tmp_path)
    run_dir = tmp_path / "run"
    proc = run_stress(run_dir, url, {"mode": "smoke", "workload": "trace", "trace_file": str(trace)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    stress = _records(run_dir)
    assert stress.run_modes == ["workload=trace"]        # without run_mode= the workload runs alone
    (point,) = stress.points
    assert point.mode == "workload" and point.name == "workload_trace-hand-trace_isl-14_osl-2_con-12_n-12"
    assert (point.sent, point.completed, point.failed, point.passed) == (12, 12, 0, True)
    w = point.workload
    assert w["kind"] == "trace" and w["requests"] == 12 and w["span_s"] == 0.55 and w["kept_up"] is True
    assert point.checks["trace_kept_up"] == {"value": 0, "limit": 0, "passed": True, "n": 12,
                                             "detail": "every request left within 50 ms of its timestamp"}
    assert point.saturation is not None and point.saturation["fired"] is False
    assert point.server_state["samples"] >= 1 and point.server_state["origin_perf_s"] > 0
    rows = [json.loads(line) for line in (run_dir / point.requests_file).read_text().splitlines()]
    assert sorted(r["trace_line"] for r in rows) == list(range(2, 14))
    assert all(0 <= r["lateness_ms"] < 50 for r in rows)
    # every request left at its timestamp: sent 50 ms apart on the client's clock, as the trace says
    sends = sorted(r["send_time_s"] for r in rows)
    assert all(abs((b - a) - 0.05) < 0.05 for a, b in zip(sends, sends[1:]))

    # the report plots the load point: latency per request over the server's samples, and offered vs achieved
    from reports.builder import build_report
    from reports.html_renderer import render_html
    (run_dir / "manifest.json").write_text(json.dumps({
        "schema": "tt-run-manifest/1", "run_id": "r1", "model_id": "stub", "workflow": "stress_tests",
        "status": "passed", "steps": [{"name": "stress_tests", "status": "passed"}]}))
    write_model_spec(run_dir / "model_spec.json", model_id="stub", status="EXPERIMENTAL")
    record = build_report(run_dir)
    (t,) = record.stress_tests.timelines
    assert t.name == point.name and t.workload == "trace" and len(t.requests) == 12
    assert all(0 <= r[0] < 5 and r[1] is not None and r[2] >= r[1] for r in t.requests)
    assert any("the client kept up" in line for line in t.lines)
    html = render_html(record)
    section = html[html.index("<h2>Stress tests</h2>"):]
    svg = re.search(r'<svg class="plot" data-plot="server-state".*?</svg>', section, re.S).group(0)
    assert point.name in svg and svg.count("<circle") == 24                  # TTFT and end-to-end per request
    assert "the server exposed no state on /metrics" in svg                # the stub has no vLLM gauges
    assert 'data-plot="trace-rate"' in section and "Load points over time" in section

    strict = run_stress(tmp_path / "strict", url, {"mode": "smoke", "workload": "trace", "trace_file": str(trace),
                                                   "max_lateness_ms": "0.0001"})
    assert strict.returncode == 1, strict.stdout[-3000:]
    (late,) = _records(tmp_path / "strict").points
    assert late.passed is False and late.checks["trace_kept_up"]["passed"] is False
    assert late.detail.startswith("failed trace_kept_up: the client could not keep up with trace")


def test_conversations_and_shared_prefixes_as_stress_points(stub, tmp_path):  # noqa: F811
    url, _ = stub("--ttft-ms", "5", "--itl-ms", "1")
    shape = {"mode": "smoke", "input_size": "16", "output_size": "4", "max_concurrent": "2", "num_prompts": "4"}
    proc = run_stress(tmp_path / "mt", url, {**shape, "workload": "multi_turn", "turns": "2", "think_time_s": "0"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (mt,) = _records(tmp_path / "mt").points
    assert mt.name == "workload_multi_turn_isl-16_osl-4_con-2_n-4" and (mt.sent, mt.completed) == (8, 8)
    assert [t["turn"] for t in mt.workload["per_turn"]] == [1, 2]
    assert all(t["ttft"]["n"] == 4 for t in mt.workload["per_turn"]) and mt.passed
    rows = [json.loads(line) for line in (tmp_path / "mt" / mt.requests_file).read_text().splitlines()]
    assert sorted((r["conversation"], r["turn"]) for r in rows) == [(c, t) for c in range(4) for t in (1, 2)]

    proc = run_stress(tmp_path / "sp", url, {**shape, "workload": "shared_prefix", "prefixes": "2",
                                             "prefix_tokens": "8", "run_mode": "single"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    stress = _records(tmp_path / "sp")
    assert [p.mode for p in stress.points] == ["single", "workload"]   # run_mode= names load modes too
    sp = stress.points[1]
    assert sp.workload["kind"] == "shared_prefix" and sp.workload["prefix_tokens"] == 8
    assert sp.workload["shared"]["completed"] == sp.workload["unshared"]["completed"] == 4
    assert (tmp_path / "sp" / sp.workload["unshared"]["requests_file"]).is_file() and sp.passed


def _arrivals(ttft_s) -> list:
    """Requests arriving 10 per second for 30 s (an open loop, as a trace sends them), first token after
    ``ttft_s(t)``, the answer 100 ms later."""
    from benchmarking.metrics import RequestRecord
    out = []
    for i in range(300):
        t = i / 10
        out.append(RequestRecord(index=i, request_id=str(i), prompt_len=8, requested_output_len=2, send_time=100 + t,
                                 success=True, ttft=ttft_s(t), latency=ttft_s(t) + 0.1))
    return out


def test_the_detector_watches_a_finished_workload_as_it_watches_a_running_load():
    from stress_tests.workload import saturation_after
    rng = random.Random(3)
    falling_behind = saturation_after(_arrivals(lambda t: 0.05 + 0.02 * t), 100.0, closed_loop=False, window_s=10)
    assert falling_behind.fired and "requests in flight rose" in falling_behind.reason
    assert 10 <= falling_behind.at_s < 15                       # as soon as the window and its samples allow
    keeping_up = saturation_after(_arrivals(lambda t: 0.05 + 0.01 * rng.random()), 100.0, closed_loop=False,
                                  window_s=10)
    assert not keeping_up.fired and keeping_up.reason == "keeping up"


@pytest.mark.parametrize("rows, args, message", [
    ("timestamp,input_tokens,output_tokens\n100,8,2\n50,8,2\n", {}, "hand.trace.csv:3"),
    ("timestamp,input_tokens,output_tokens\n0,8,2\n3000,8,2\n", {"budget_s": "2"},
     "budget_s=2 ends before the trace does (3 s"),
    (None, {"turns": "2"}, "turns= applies to workload=multi_turn only"),
    (None, {"workload": "multi_turn", "turns": "0"}, "turns"),
])
def test_bad_workload_input_exits_2_before_anything_is_sent(tmp_path, rows, args, message):
    wargs = {"mode": "smoke", **args}
    if rows is not None:
        (tmp_path / "hand.trace.csv").write_text(rows)
        wargs.update(workload="trace", trace_file=str(tmp_path / "hand.trace.csv"))
    proc = run_stress(tmp_path / "run", "http://127.0.0.1:9", wargs)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "run" / "stress_tests" / "stress_record.json").exists()
