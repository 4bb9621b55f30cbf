"""The client against the shipped stub: error classes, budgets, and run_benchmarks end to end."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarking.client import ClientConfig
from benchmarking.metrics import compute_metrics
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from contracts import REPO_ROOT
from tests.helpers import model_spec


SPEC = model_spec(model_id="stub-id", hf_model_repo="org/stub", served_model_name="stub-model", device_model_spec={
    "max_context": 1024, "max_concurrency": 4, "perf_reference": [
        {"isl": 128, "osl": 32, "max_concurrency": 4, "num_prompts": 8, "task_type": "text",
         "targets": {"functional": {"ttft_ms": 5000, "tput_user": 1, "tput": 4},
                     "target": {"ttft_ms": 0.001, "tput_user": 1e9, "tput": None}}}]}).to_dict()


def items(n, osl=8):
    return [WorkItem(request_body("a b c", osl, "stub-model", False), 3, osl)] * n


def test_every_fault_is_classified_and_the_run_goes_on(stub_factory):
    stub = stub_factory("--ttft-ms", "2", "--itl-ms", "1", "--fault", "http:503:3", "--fault", "reset:4",
                        "--fault", "malformed:5", "--fault", "stall:7", "--fault", "error_event:11",
                        "--fault", "short:13")
    cfg = ClientConfig(base_url=stub.url, stall_timeout_s=0.5, request_timeout_s=10)
    run = run_point(cfg, items(26), [0.0] * 26, 4)
    counts: dict = {}
    for r in run.records:
        counts[r.error_class] = counts.get(r.error_class, 0) + 1
    # stub request numbers 1..26, first matching fault wins: 503 on 3,6,..,24; reset on 4,8,16,20;
    # malformed on 5,10,25; stall on 7,14; error_event on 11,22; short on 13,26 (a success)
    assert counts == {None: 7, "http_5xx": 8, "connection_reset": 4, "malformed_sse": 3, "stall": 2,
                      "stream_error": 2}
    m = compute_metrics(run.records, run.duration, isl=3, osl=8, max_concurrency=4, num_prompts=26, percentiles=[99])
    assert m["failed"] == 19 and m["completed"] == 7
    assert m["output_length_mismatches"] == 2                     # the two `short` responses
    assert sum(m["failures_by_class"].values()) == 19


def test_point_budget_keeps_what_finished(stub_factory):
    stub = stub_factory("--ttft-ms", "1", "--itl-ms", "100")
    run = run_point(ClientConfig(base_url=stub.url), items(20, osl=5), [0.0] * 20, 2, budget_s=1.2)
    done = [r for r in run.records if r.success]
    cut = [r for r in run.records if r.error_class == "budget_exceeded"]
    assert run.budget_exhausted and 2 <= len(done) <= 4 and len(cut) == 2 and run.not_sent >= 14


def test_connect_error_is_a_failed_request_not_a_crash():
    run = run_point(ClientConfig(base_url="http://127.0.0.1:9", connect_timeout_s=2), items(2), [0.0, 0.0], 1)
    assert [r.error_class for r in run.records] == ["connect_error", "connect_error"]


def _run(run_dir, url, wargs, *extra, env_extra=None):
    spec = os.path.join(run_dir, "model_spec.json")
    os.makedirs(run_dir, exist_ok=True)
    with open(spec, "w") as fh:
        json.dump(SPEC, fh)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="stub-model", **(env_extra or {}))
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks",
                           "--run-dir", run_dir,
                           "--model-spec-json", spec, "--server-url", url, "--workflow-args-json", json.dumps(wargs),
                           *extra], capture_output=True, text=True, env=env, timeout=120)


def test_run_benchmarks_smoke_resume_and_exit_codes(stub_factory, tmp_path, tiny_tokenizer_dir):
    stub = stub_factory("--ttft-ms", "3", "--itl-ms", "1", "--fault", "http:500:9")
    run_dir = str(tmp_path / "run")
    p = _run(run_dir, stub.url, {"mode": "smoke", "goodput": "ttft:1000"},
             env_extra={"TT_TOKENIZER_DIR": tiny_tokenizer_dir})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "TTFT ms" in p.stdout and "warm-up isl=128 osl=32" in p.stdout
    bdir = os.path.join(run_dir, "benchmarks")
    outputs = json.load(open(os.path.join(bdir, "outputs.json")))["outputs"]
    stems = ["point_isl-128_osl-32_con-4_n-8"]  # smoke measures the spec's perf_reference points
    for stem in stems:
        rec = json.load(open(os.path.join(bdir, stem + ".json")))
        assert rec["schema"] == "tt-bench-point/1" and rec["tool"] == "tt-bench"
        assert f"benchmarks/{stem}.json" in outputs and rec["requests_file"] in outputs
        rows = [json.loads(line) for line in open(os.path.join(run_dir, rec["requests_file"]))]
        assert len(rows) == rec["point"]["num_prompts"]
        assert rec["metrics"]["completed"] + rec["metrics"]["failed"] == len(rows)
        assert rec["metrics"]["request_goodput"] is not None and "p99_ttft_ms" in rec["metrics"]
        assert rec["prompt_check"]["verified_by"] == "tokenizer"
        assert rec["server_metrics"]["delta"]["stub_generation_tokens_total"] > 0
    big = json.load(open(os.path.join(bdir, stems[0] + ".json")))
    assert big["point"]["source"] == "perf_reference" and big["targets"]["functional"]["ttft_pass"] is True
    assert big["targets"]["target"]["ttft_pass"] is False and big["targets"]["target"]["tput_pass"] is None
    assert big["metrics"]["failures_by_class"] == {"http_5xx": 1}

    mtime = os.path.getmtime(os.path.join(bdir, stems[0] + ".json"))
    again = _run(run_dir, stub.url, {"mode": "smoke"}, "--disable-trace-capture")
    assert again.returncode == 0 and again.stdout.count("skipping (resume)") == 1
    assert "warm-up" not in again.stdout and os.path.getmtime(os.path.join(bdir, stems[0] + ".json")) == mtime

    bad = _run(str(tmp_path / "bad"), stub.url, {"mode": "smoke", "max_tokens": "5"})
    assert bad.returncode == 2 and "max_tokens is set by the benchmark itself" in bad.stderr
    assert not os.path.exists(str(tmp_path / "bad" / "benchmarks"))
    fields = _run(str(tmp_path / "fields"), stub.url, {"mode": "smoke", "temperature": "0.7", "top_k": "40"},
                  "--disable-trace-capture", env_extra={"TT_TOKENIZER_DIR": tiny_tokenizer_dir})
    assert fields.returncode == 0, fields.stdout + fields.stderr
    assert "request body fields from --workflow-args: temperature=0.7 top_k=40" in fields.stdout


def test_all_failed_point_exits_1_and_keeps_the_other(stub_factory, tmp_path):
    stub = stub_factory("--fault", "http:500:1")
    good = stub_factory()
    run_dir = str(tmp_path / "run")
    ok = _run(run_dir, good.url, {"points": "16x4x1x2"}, "--disable-trace-capture")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    p = _run(run_dir, stub.url, {"points": "16x4x1x2,32x4x2x2"}, "--disable-trace-capture")
    assert p.returncode == 1 and "FAILED points" in p.stdout
    bdir = os.path.join(run_dir, "benchmarks")
    assert json.load(open(os.path.join(bdir, "point_isl-16_osl-4_con-1_n-2.json")))["metrics"]["completed"] == 2
    failed = json.load(open(os.path.join(bdir, "point_isl-32_osl-4_con-2_n-2.json")))
    assert failed["metrics"]["failed"] == 2 and failed["metrics"]["failures_by_class"] == {"http_5xx": 2}
    assert "NOTE: no local tokenizer" in p.stdout
