"""Metric math on hand-built request timelines (vLLM definitions) and the BenchPoint record."""
from __future__ import annotations

import dataclasses
import math

import pytest

from benchmarking.metrics import RequestRecord, compute_metrics
from contracts.intervals import percentile
from records.bench import SCHEMA, BenchMetrics, BenchPoint, PointParams, describe
from contracts.typed_record import RecordError


def rec(i, chunk_times, out_tokens=None, ok=True, warmup=False, err=None, prompt_len=10, in_tokens=None):
    r = RequestRecord(index=i, request_id=f"r{i}", prompt_len=prompt_len, requested_output_len=4,
                      warmup=warmup, success=ok, error_class=err)
    if ok:
        r.chunk_times = list(chunk_times)
        r.ttft, r.latency, r.ttft_nonempty = chunk_times[0], chunk_times[-1], chunk_times[0]
        r.output_tokens = out_tokens if out_tokens is not None else len(chunk_times)
        r.input_tokens = in_tokens if in_tokens is not None else prompt_len
        r.input_token_source = "usage"
    return r


def test_vllm_metric_definitions_on_hand_built_timeline():
    # request A: ttft 100 ms, chunks every 20 ms, 4 tokens -> tpot = (160-100)/3 = 20 ms
    a = rec(0, [0.100, 0.120, 0.140, 0.160])
    # request B: ttft 200 ms, 3 tokens, uneven gaps 10 ms and 50 ms -> tpot = 60/2 = 30 ms
    b = rec(1, [0.200, 0.210, 0.260])
    # request C: a single token -> no tpot, no itl
    c = rec(2, [0.050])
    failed = rec(3, [], ok=False, err="http_5xx")
    warm = rec(4, [5.0, 6.0], warmup=True)
    m = compute_metrics([a, b, c, failed, warm], duration=2.0, isl=10, osl=4, max_concurrency=2, num_prompts=4,
                        percentiles=[50, 99])
    assert m["completed"] == 3 and m["failed"] == 1
    assert m["failures_by_class"] == {"http_5xx": 1}
    assert m["total_output_tokens"] == 8 and m["total_input_tokens"] == 30
    assert m["request_throughput"] == pytest.approx(1.5)
    assert m["output_throughput"] == pytest.approx(4.0)
    assert m["total_token_throughput"] == pytest.approx(19.0)
    assert m["mean_ttft_ms"] == pytest.approx((100 + 200 + 50) / 3)
    assert m["median_ttft_ms"] == pytest.approx(100)
    assert m["mean_tpot_ms"] == pytest.approx(25.0)           # only A and B have >1 token
    itls = [20, 20, 20, 10, 50]                                 # flattened chunk gaps
    assert m["mean_itl_ms"] == pytest.approx(sum(itls) / 5)
    assert m["std_itl_ms"] == pytest.approx(math.sqrt(sum((x - 24) ** 2 for x in itls) / 5))
    assert m["p99_itl_ms"] == pytest.approx(percentile(itls, 99))
    assert m["mean_e2el_ms"] == pytest.approx((160 + 260 + 50) / 3)
    assert m["tput_user"] == pytest.approx(40.0)               # 1000 / 25
    assert m["decode_throughput"] == pytest.approx(80.0)       # x min(2, 4)
    assert m["prefill_throughput"] == pytest.approx(10 * 2 / (m["mean_ttft_ms"] / 1000))
    assert m["request_goodput"] is None
    assert m["output_length_mismatches"] == 2                  # B has 3, C has 1 (osl 4)
    assert m["input_token_drift"] == 0


def test_goodput_uses_distserve_rule():
    a = rec(0, [0.100, 0.120, 0.140, 0.160])   # ttft 100, tpot 20
    b = rec(1, [0.300, 0.400])                  # ttft 300, tpot 100
    c = rec(2, [0.050])                          # 1 token: tpot counts as 0
    m = compute_metrics([a, b, c], 1.0, isl=1, osl=4, max_concurrency=1, num_prompts=3, percentiles=[99],
                        goodput={"ttft": 150.0, "tpot": 50.0})
    assert m["request_goodput"] == pytest.approx(2.0)


def test_all_failed_point_has_no_latency_not_zero_latency():
    m = compute_metrics([rec(0, [], ok=False, err="timeout")], 1.0, isl=1, osl=1, max_concurrency=1,
                        num_prompts=1, percentiles=[99])
    assert m["completed"] == 0 and m["tput_user"] is None and m["request_throughput"] == 0.0
    assert m["mean_ttft_ms"] is None and m["p99_ttft_ms"] is None and m["median_e2el_ms"] is None
    assert m["failures_by_class"] == {"timeout": 1} and m["error_rate"] == 1.0


def test_legend_covers_every_saved_key():
    m = compute_metrics([rec(0, [0.1, 0.2])], 1.0, isl=1, osl=2, max_concurrency=1, num_prompts=1,
                        percentiles=[50, 99.9], goodput={"e2el": 1000})
    missing = [k for k in m if not describe(k)]
    assert not missing, missing
    assert "non-empty" in describe("mean_ttft_ms") and describe("p99.9_itl_ms").startswith("99.9th percentile")



# -- the point record --------------------------------------------------------------------------

def _point(**metrics):
    return BenchPoint(model_id="m", tool="tt-bench",
                      point=PointParams(isl=128, osl=64, max_concurrency=4, num_prompts=2),
                      metrics=BenchMetrics(**metrics))


def test_derived_figures_are_computed_once_by_the_record():
    p = _point(duration=2.0, completed=2, failed=0, total_input_tokens=256, total_output_tokens=128,
               mean_ttft_ms=50.0, mean_tpot_ms=20.0)
    m = p.metrics
    assert m.tput_user == 50.0 and m.decode_throughput == 100.0      # x min(con 4, n 2)
    assert m.prefill_throughput == pytest.approx(128 * 2 / 0.05)
    assert m.request_throughput == 1.0 and m.output_throughput == 64.0 and m.total_token_throughput == 192.0
    assert m.error_rate == 0.0
    given = _point(completed=2, failed=0, mean_tpot_ms=20.0, tput_user=49.0)  # a tool's own figure is kept
    assert given.metrics.tput_user == 49.0 and given.metrics.decode_throughput == 98.0


def test_compute_metrics_and_the_record_agree():
    a, b = rec(0, [0.100, 0.120, 0.140, 0.160]), rec(1, [0.200, 0.210, 0.260])
    m = compute_metrics([a, b], 2.0, isl=10, osl=4, max_concurrency=2, num_prompts=2, percentiles=[99])
    again = BenchPoint(model_id="m", tool="tt-bench",
                       point=PointParams(isl=10, osl=4, max_concurrency=2, num_prompts=2),
                       metrics=BenchMetrics.from_dict(m))
    assert again.metrics.to_dict() == m


def test_error_rate_counts_failed_and_unsent_requests():
    p = BenchPoint(model_id="m", tool="tt-bench", point=PointParams(isl=1, osl=1, max_concurrency=1, num_prompts=8),
                   metrics=BenchMetrics(completed=5, failed=1, failures_by_class={"budget_exceeded": 1}),
                   not_sent=2)
    assert p.metrics.error_rate == 3 / 8
    assert p.failure_summary() == "3 of 8 requests failed (not_sent 2, budget_exceeded 1)"
    p.interrupted = "SIGINT"  # a signal's unsent requests are not the server's failures
    assert p.failure_summary() == "1 of 6 requests failed (budget_exceeded 1)"
    assert _point(completed=2, failed=0).failure_summary() == ""


def test_point_round_trip_keeps_unknown_keys_and_reads_older_files(tmp_path):
    m = compute_metrics([rec(0, [0.1, 0.2]), rec(1, [], ok=False, err="http_5xx")], 1.0, isl=1, osl=2,
                        max_concurrency=1, num_prompts=2, percentiles=[50, 99])
    data = {"schema": SCHEMA, "model_id": "m", "served_model_name": "org/m", "tool": "tt-bench",
            "point": {"isl": 1, "osl": 2, "max_concurrency": 1, "num_prompts": 2, "request_rate": "inf",
                      "future_param": 3},
            "metrics": m, "targets": {}, "requests_file": "benchmarks/x.requests.jsonl",
            "warnings": [], "a_newer_field": {"x": 1}}
    p = BenchPoint.from_dict(data)
    assert p.point.extra == {"future_param": 3} and p.extra == {"a_newer_field": {"x": 1}}
    assert p.metrics.extra["p99_ttft_ms"] == m["p99_ttft_ms"]
    back = BenchPoint.read(p.write(tmp_path / "point.json"))
    assert back == p and back.to_dict() == p.to_dict()
    assert back.to_dict()["a_newer_field"] == {"x": 1} and back.to_dict()["point"]["future_param"] == 3
    # a file from before error_rate existed reads the same, with the error rate filled in
    old = {k: v for k, v in data.items() if k != "a_newer_field"}
    old["metrics"] = {k: v for k, v in m.items() if k not in ("error_rate", "tput_user", "decode_throughput")}
    assert BenchPoint.from_dict(old).metrics.error_rate == 0.5
    assert BenchPoint.from_dict(old).metrics.tput_user == m["tput_user"]


def test_point_record_refuses_other_kinds_and_missing_fields():
    with pytest.raises(RecordError, match="not a 'tt-bench-point' record"):
        BenchPoint.from_dict({"schema": "tt-eval-record/1"})
    with pytest.raises(RecordError, match="missing field"):
        BenchPoint.from_dict({"schema": SCHEMA, "model_id": "m", "tool": "tt-bench"})


def test_legend_is_the_field_descriptions():
    legend = BenchPoint.legend()
    assert set(legend) == {f.name for f in dataclasses.fields(BenchPoint)}
    assert all(BenchMetrics.legend().values()) and all(PointParams.legend().values())
