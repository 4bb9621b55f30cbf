"""Workloads through run_benchmarks against the stub: file names, rows, resume, a client that cannot keep up."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from contracts import REPO_ROOT
from tests.helpers import model_spec


def _bench(run_dir, url, wargs: dict, tokenizer_dir: str) -> subprocess.CompletedProcess:
    os.makedirs(run_dir, exist_ok=True)
    spec = os.path.join(run_dir, "model_spec.json")
    with open(spec, "w") as fh:
        json.dump(model_spec(model_id="stub", device_model_spec={"max_context": 1024, "max_concurrency": 4,
                                                                  "perf_reference": []}).to_dict(), fh)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="stub-model", TT_TOKENIZER_DIR=tokenizer_dir)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks",
                           "--run-dir", str(run_dir), "--model-spec-json", spec, "--server-url", url,
                           "--workflow-args-json", json.dumps(wargs), "--disable-trace-capture"],
                          capture_output=True, text=True, env=env, timeout=120)


def test_trace_on_the_stub_resumes_and_fails_when_the_client_falls_behind(stub_factory, tmp_path, tiny_tokenizer_dir):
    stub = stub_factory("--ttft-ms", "5", "--itl-ms", "1")
    trace = tmp_path / "my.trace.csv"
    trace.write_text("timestamp,input_tokens,output_tokens\n" + "".join(f"{50 * i},{8 + i},{2 + i % 2}\n"
                                                                        for i in range(8)))
    wargs = {"workload": "trace", "trace_file": str(trace), "time_scale": "2"}
    p = _bench(tmp_path / "run", stub.url, wargs, tiny_tokenizer_dir)
    assert p.returncode == 0, p.stdout + p.stderr
    stem = "point_trace-my-trace_isl-12_osl-2_con-8_n-8"
    bdir = tmp_path / "run" / "benchmarks"
    rec = json.loads((bdir / f"{stem}.json").read_text())
    assert rec["point"]["dataset"] == "trace" and rec["workload"]["shape"] == "csv"
    assert rec["workload"]["span_s"] == 0.175 and rec["workload"]["kept_up"] is True   # 350 ms at twice the speed
    rows = [json.loads(line) for line in (bdir / f"{stem}.requests.jsonl").read_text().splitlines()]
    assert sorted(r["trace_line"] for r in rows) == list(range(2, 10))
    assert all(r["lateness_ms"] >= 0 and r["requested_output_len"] in (2, 3) for r in rows)
    again = _bench(tmp_path / "run", stub.url, wargs, tiny_tokenizer_dir)
    assert again.returncode == 0 and "skipping (resume)" in again.stdout

    strict = _bench(tmp_path / "strict", stub.url, {**wargs, "max_lateness_ms": "0.0001"}, tiny_tokenizer_dir)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "the client could not keep up with trace" in strict.stdout and "FAILED points" in strict.stdout


def test_workload_keys_need_their_workload(stub_factory, tmp_path, tiny_tokenizer_dir):
    p = _bench(tmp_path / "run", "http://127.0.0.1:9", {"turns": "3"}, tiny_tokenizer_dir)
    assert p.returncode == 2 and "turns= applies to workload=multi_turn only" in p.stderr


def test_a_point_budget_shorter_than_the_trace_is_refused(tmp_path, tiny_tokenizer_dir):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 2}\n'
                     '{"timestamp": 3000, "input_length": 8, "output_length": 2}\n')
    p = _bench(tmp_path / "run", "http://127.0.0.1:9", {"workload": "trace", "trace_file": str(trace),
                                                         "stall_timeout_s": "0.5", "point_budget_s": "2"},
               tiny_tokenizer_dir)
    assert p.returncode == 2 and "point_budget_s=2 ends before the trace does (3 s" in p.stderr
    assert not (tmp_path / "run" / "benchmarks").exists()


def test_open_loop_rows_carry_their_lateness(stub_factory, tmp_path, tiny_tokenizer_dir):
    stub = stub_factory("--ttft-ms", "2", "--itl-ms", "1")
    for rate, timed in (("20", True), ("inf", False)):
        run_dir = tmp_path / rate
        p = _bench(run_dir, stub.url, {"points": "16x2x4x6", "request_rate": rate}, tiny_tokenizer_dir)
        assert p.returncode == 0, p.stdout + p.stderr
        rows = [json.loads(line) for line in
                (run_dir / "benchmarks" / "point_isl-16_osl-2_con-4_n-6.requests.jsonl").read_text().splitlines()]
        assert len(rows) == 6 and all(("lateness_ms" in r) is timed for r in rows)
        assert all(r["lateness_ms"] >= 0 for r in rows if timed)
