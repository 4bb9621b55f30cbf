"""benchmarking.body_fields: --workflow-args keys the benchmarks workflow does not own are request body fields."""

from __future__ import annotations

import json

import pytest

from benchmarking.bench_args import BenchArgError, parse_workflow_args
from benchmarking.prompts import request_body


def test_unowned_keys_become_typed_request_body_fields() -> None:
    args = parse_workflow_args({"mode": "smoke", "temperature": "0.7", "top_k": "40", "logprobs": "true",
                                "user": "bench", "top_p": "nan"})
    assert args.mode == "smoke"
    assert args.body_fields == {"temperature": 0.7, "top_k": 40, "logprobs": True, "user": "bench", "top_p": "nan"}
    body = json.loads(request_body("hi", 16, "m", False, args.body_fields))
    assert body["temperature"] == 0.7 and body["top_k"] == 40 and body["user"] == "bench"
    assert body["max_tokens"] == 16 and body["min_tokens"] == 16 and body["ignore_eos"] is True  # the point's own


@pytest.mark.parametrize("key, message", [
    ("max_tokens", "max_tokens is set by the benchmark itself (each point's output length: choose it with points="),
    ("stream", "stream is set by the benchmark itself"),
    ("batch_size", "batch_size is an lm-eval setting (the evals workflow), not a request body field"),
])
def test_fields_the_benchmark_owns_are_refused(key: str, message: str) -> None:
    with pytest.raises(BenchArgError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_workflow_args({key: "1"})


def test_body_fields_do_not_reach_the_vllm_tool_silently() -> None:
    with pytest.raises(BenchArgError, match="tools=vllm .* cannot send them"):
        parse_workflow_args({"tools": "tt,vllm", "temperature": "0.5"})
