"""The server-state sampler's series: gauges summed over labels, counters turned into per-interval rates."""
from __future__ import annotations

from contracts import prometheus as prom
from contracts.server_state import SAMPLED, ServerStateSampler, prefix_cache_hit_rate

VLLM = """# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="m"} %d
vllm:num_requests_waiting{engine="0",model_name="m"} %d
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 99
vllm:kv_cache_usage_perc{engine="0",model_name="m"} %g
vllm:prefix_cache_queries_total{engine="0",model_name="m"} %d
vllm:prefix_cache_hits_total{engine="0",model_name="m"} %d
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 3
"""
MEDIA = """tt_media_server_queue_depth{model="whisper"} %d
tt_media_server_batch_size_sum{model="whisper"} %d
tt_media_server_batch_size_count{model="whisper"} %d
"""


def _sampler(scrapes: list[str]) -> ServerStateSampler:
    s = ServerStateSampler("http://unused")
    s.origin = 100.0
    s.samples = [(100.0 + i, prom.parse_prometheus(text, SAMPLED)) for i, text in enumerate(scrapes)]
    return s


def test_vllm_series():
    s = _sampler([VLLM % (0, 0, 0.0, 0, 0), VLLM % (2, 3, 0.25, 400, 100), VLLM % (1, 0, 0.5, 400, 100),
                  VLLM % (0, 0, 0.1, 600, 250)])
    out = s.series()
    assert out["t_s"] == [0.0, 1.0, 2.0, 3.0] and out["samples"] == 4
    assert out["series"]["running"] == [0, 2, 1, 0] and out["series"]["waiting"] == [0, 3, 0, 0]  # not *_by_reason
    assert out["series"]["kv_cache_usage_pct"] == [0.0, 25.0, 50.0, 10.0]
    # hits/queries of each interval; an interval without lookups has no rate (not 0)
    assert out["series"]["prefix_cache_hit_rate"] == [None, 0.25, None, 0.75]
    assert "queue_depth" not in out["series"] and "mean_batch_size" not in out["series"]
    before, after = (prom.parse_prometheus(VLLM % args, SAMPLED) for args in ((0, 0, 0, 0, 0), (0, 0, 0, 600, 250)))
    assert prefix_cache_hit_rate(before, after) == {"hit_rate": 250 / 600, "hit_tokens": 250, "queried_tokens": 600}
    assert prefix_cache_hit_rate(before, {}) is None


def test_media_server_series():
    out = _sampler([MEDIA % (5, 0, 0), MEDIA % (2, 12, 4), MEDIA % (0, 14, 6)]).series()
    assert out["series"] == {"queue_depth": [5, 2, 0], "mean_batch_size": [None, 3.0, 1.0]}


def test_no_samples_no_record():
    assert ServerStateSampler("http://unused").series() is None
