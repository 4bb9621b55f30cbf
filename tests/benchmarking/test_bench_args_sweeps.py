"""Workflow args, sweep construction (the upstream sweep rules) and the warm-up plan."""
from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarking.bench_args import WORKFLOW_ARG_KEYS, BenchArgError, parse_workflow_args
from benchmarking.sweeps import build_points, num_prompts_for
from benchmarking.trace_capture import warmup_pairs
from contracts import REPO_ROOT
from tests.helpers import model_spec

REFERENCE = [{"isl": 128, "osl": 128, "max_concurrency": 1, "num_prompts": 8, "task_type": "text",
              "targets": {"functional": {"ttft_ms": 100, "tput_user": 5, "tput": 5}}},
             {"isl": 1024, "osl": 1024, "max_concurrency": 32, "num_prompts": 0, "task_type": "text"},
             {"isl": 128, "osl": 128, "max_concurrency": 1, "num_prompts": 0, "task_type": "image"}]
SPEC = model_spec(model_id="m", hf_model_repo="org/m",
                  device_model_spec={"max_context": 4096, "max_concurrency": 32, "perf_reference": REFERENCE})


def test_keys_importable_without_third_party_packages():
    code = ("import sys; import benchmarking.run_benchmarks as r, benchmarking.trace_capture, "
            "records.bench, benchmarking.metrics, benchmarking.sweeps; "
            "bad = [m for m in ('aiohttp', 'uvloop', 'tokenizers', 'numpy') if m in sys.modules]; "
            "assert not bad, bad; assert 'mode' in r.WORKFLOW_ARG_KEYS")
    subprocess.run([sys.executable, "-S", "-c", code], check=True, cwd=REPO_ROOT)
    assert {"mode", "only_targets", "points", "percentiles", "goodput", "tools", "budget_s", "request_rate",
            "burstiness", "dataset"} <= WORKFLOW_ARG_KEYS


def test_parse_and_reject():
    a = parse_workflow_args({"mode": "full", "points": "128x64x4,256x32x1x9", "percentiles": "50,99.9",
                             "goodput": "ttft:500,tpot:50", "request_rate": "inf", "burstiness": "inf",
                             "dataset": "shared_prefix:32", "endpoint": "chat", "only_targets": "true"})
    assert a.points == [(128, 64, 4, None), (256, 32, 1, 9)] and a.percentiles == [50, 99.9]
    assert a.goodput == {"ttft": 500.0, "tpot": 50.0} and a.shared_prefix_len == 32
    assert a.endpoint == "/v1/chat/completions" and a.only_targets
    with pytest.raises(BenchArgError, match="unknown benchmarks workflow arg 'moed'; did you mean 'mode'"):
        parse_workflow_args({"moed": "ci"})
    for bad in ({"mode": "huge"}, {"points": "12x3"}, {"goodput": "ttfx:3"}, {"burstiness": "0"},
                {"percentiles": "0"}, {"dataset": "csv:x"}, {"tools": "genai"}):
        with pytest.raises(BenchArgError):
            parse_workflow_args(bad)


def test_num_prompts_rule():
    assert num_prompts_for(128, 128, 32) == 256
    assert num_prompts_for(2048, 128, 32) == 128
    assert num_prompts_for(2048, 2048, 32) == 64
    assert num_prompts_for(8000, 64, 1) == 2


def test_sweep_modes():
    full = build_points(SPEC, parse_workflow_args({"mode": "full"}))
    keys = [p.key for p in full]
    assert keys[:2] == [(128, 128, 1), (1024, 1024, 32)]               # perf_reference first, image skipped
    assert keys.count((128, 128, 1)) == 1                                # duplicate with the sweep removed
    assert all(p.isl + p.osl <= 4096 for p in full)                      # max_context filter
    assert (4096, 128, 1) not in keys and (3072, 128, 1) in keys
    assert full[0].targets["functional"]["ttft_ms"] == 100 and full[0].num_prompts == 8
    assert {p.source for p in full} == {"perf_reference", "batch_1", "max_concurrency"}
    ci = build_points(SPEC, parse_workflow_args({}))
    assert [p.key for p in ci] == [(128, 128, 1), (1024, 1024, 32)]  # ci measures what is judged
    assert [p.num_prompts for p in ci] == [8, full[1].num_prompts]
    assert next(p for p in full if p.key == (128, 128, 32)).num_prompts == 256
    no_refs_ci = build_points(model_spec(model_id="m", device_model_spec={
        "max_context": 4096, "max_concurrency": 32, "perf_reference": []}), parse_workflow_args({"mode": "ci"}))
    # nothing to judge: the first pair of each sweep, sweep points at half of full's prompts
    assert [(p.key, p.num_prompts) for p in no_refs_ci] == [((128, 128, 1), 4), ((128, 128, 32), 128)]
    only = build_points(SPEC, parse_workflow_args({"only_targets": "true", "mode": "full"}))
    assert [p.source for p in only] == ["perf_reference"] * 2
    smoke = build_points(SPEC, parse_workflow_args({"mode": "smoke"}))
    assert [p.key for p in smoke] == [(128, 128, 1), (1024, 1024, 32)]  # smoke measures what carries targets
    no_refs = model_spec(model_id="m",
                         device_model_spec={"max_context": 4096, "max_concurrency": 32, "perf_reference": []})
    assert [p.key for p in build_points(no_refs, parse_workflow_args({"mode": "smoke"}))] == [(64, 16, 1), (128, 32, 4)]
    chosen = build_points(SPEC, parse_workflow_args({"points": "128x128x1,64x8x2x3", "num_prompts": "5"}))
    assert [(p.key, p.num_prompts, p.source) for p in chosen] == [((128, 128, 1), 5, "perf_reference"),
                                                                  ((64, 8, 2), 5, "custom")]
    assert chosen[0].stem == "point_isl-128_osl-128_con-1_n-5"


def test_warmup_pairs_are_distinct_and_sorted():
    assert warmup_pairs(SPEC, {"mode": "ci"}) == [(128, 128), (1024, 1024)]
    assert warmup_pairs(SPEC, {"mode": "smoke", "some_eval_key": "x"}) == [(128, 128), (1024, 1024)]


def test_perf_tiers_is_read_not_sent_as_a_request_field():
    args = parse_workflow_args({"perf_tiers": "functional"})
    assert args.perf_tiers == "functional" and "perf_tiers" not in args.body_fields
    with pytest.raises(BenchArgError, match="perf_tiers"):
        parse_workflow_args({"perf_tiers": "fastest"})
