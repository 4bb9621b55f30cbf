"""Metric math on hand-built request timelines (vLLM definitions, peers §7)."""
from __future__ import annotations

import math

import pytest

from benchmarking.metrics import RequestRecord, compute_metrics, percentile
from benchmarking.metrics_legend import LEGEND, describe
from benchmarking.targets import judge


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


def test_percentile_matches_numpy_linear_rule():
    assert percentile([], 99) == 0.0
    assert percentile([5.0], 50) == 5.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    assert percentile([10, 0, 20], 100) == 20


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


def test_empty_and_all_failed_point_is_zero_not_crash():
    m = compute_metrics([rec(0, [], ok=False, err="timeout")], 1.0, isl=1, osl=1, max_concurrency=1,
                        num_prompts=1, percentiles=[99])
    assert m["completed"] == 0 and m["mean_ttft_ms"] == 0.0 and m["tput_user"] is None
    assert m["failures_by_class"] == {"timeout": 1}


def test_targets_ratios_and_direction():
    metrics = {"mean_ttft_ms": 200.0, "tput_user": 20.0, "decode_throughput": 640.0}
    tiers = {"functional": {"ttft_ms": 1000, "tput_user": 4, "tput": 128},
             "target": {"ttft_ms": 100, "tput_user": 40, "tput": None}}
    out = judge(metrics, tiers)
    assert out["functional"]["ttft_ratio"] == 0.2 and out["functional"]["ttft_pass"] is True
    assert out["functional"]["tput_user_pass"] is True and out["functional"]["tput_ratio"] == 5.0
    assert out["target"]["ttft_pass"] is False and out["target"]["tput_user_ratio"] == 0.5
    assert out["target"]["tput_pass"] is None and "complete" not in out


def test_legend_covers_every_saved_key():
    m = compute_metrics([rec(0, [0.1, 0.2])], 1.0, isl=1, osl=2, max_concurrency=1, num_prompts=1,
                        percentiles=[50, 99.9], goodput={"e2el": 1000})
    missing = [k for k in m if not describe(k) and k != "chunks_total"]
    assert not missing, missing
    assert "non-empty" in LEGEND["ttft"]
