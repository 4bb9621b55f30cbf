"""Speculative decoding in the benchmarks client: the lookup prompt set, the workflow args, and the point's
reading from external /metrics endpoints summed over workers (two tiny in-process /metrics servers)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from benchmarking import spec_decode_point
from benchmarking.bench_args import BenchArgError, parse_workflow_args
from benchmarking.lookup_prompts import KINDS, lookup_prompts
from benchmarking.prompts import LocalTokenizer
from contracts import REPO_ROOT
from tests.helpers import model_spec


def test_lookup_prompts_repeat_what_they_hold_at_the_asked_length(tiny_tokenizer_dir) -> None:
    tok = LocalTokenizer(tiny_tokenizer_dir)
    prompts = lookup_prompts(tok, 256, 6, seed=3)
    assert len(prompts) == 6 and prompts == lookup_prompts(tok, 256, 6, seed=3)  # seeded
    assert all(abs(p.token_len - 256) <= 2 for p in prompts), [p.token_len for p in prompts]
    texts = [p.text for p in prompts]
    assert any("Copy:" in t for t in texts) and any("```python" in t for t in texts)
    assert any("| # |" in t for t in texts)
    # what the answer should repeat is in the prompt verbatim (a faithful copy is an n-gram hit), the instruction
    # kept whole after the cut body; a table repeats its row shape inside the prompt already
    quote = next(t for t in texts if t.startswith("Copy"))
    assert "The river rises in the hills" in quote and quote.endswith("\nCopy:\n")
    table = next(t for t in texts if "| # |" in t)
    assert table.count("| item-") >= 2
    assert len(lookup_prompts(None, 64, 3)) == 3 and len(KINDS) == 3


def test_workflow_args_select_lookup_and_name_metrics_urls() -> None:
    args = parse_workflow_args({"dataset": "lookup", "spec_decode_metrics_url": "http://w0:9100/metrics,http://w1:9100"})
    assert args.dataset == "lookup" and args.spec_decode_metrics_url == ["http://w0:9100", "http://w1:9100"]
    for bad in ("", "w0:9100", "http://w0,ftp://w1"):
        with pytest.raises(BenchArgError, match="spec_decode_metrics_url"):
            parse_workflow_args({"spec_decode_metrics_url": bad})
    with pytest.raises(BenchArgError, match="lookup"):
        parse_workflow_args({"dataset": "lookups"})


class _Metrics:
    """A /metrics endpoint whose text the test sets."""

    def __init__(self) -> None:
        self.text, self.step, self.scrapes = "", None, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if outer.step is not None:  # every scrape: one more step of drafts (before < after)
                    outer.scrapes += 1
                    outer.set(*(outer.scrapes * n for n in outer.step[:3]), [outer.scrapes * n for n in outer.step[3]])
                data = outer.text.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def set(self, drafts: int, tokens: int, accepted: int, per_pos: list[int]) -> None:
        lines = [f"tt_spec_decode_num_drafts_total {drafts}", f"tt_spec_decode_num_draft_tokens_total {tokens}",
                 f"tt_spec_decode_num_accepted_tokens_total {accepted}"]
        lines += [f'tt_spec_decode_num_accepted_tokens_per_pos_total{{position="{k}"}} {n}'
                  for k, n in enumerate(per_pos)]
        self.text = "# HELP x\n" + "\n".join(lines) + "\n"


def test_the_point_reading_sums_two_workers_and_says_when_none_answers() -> None:
    w0, w1 = _Metrics(), _Metrics()
    try:
        ctx = SimpleNamespace(bench=SimpleNamespace(spec_decode_metrics_url=[w0.url, w1.url]), api_key=None)
        w0.set(10, 30, 10, [6, 3, 1])
        w1.set(0, 0, 0, [0, 0, 0])
        before = spec_decode_point.before(ctx)
        w0.set(20, 60, 25, [13, 8, 4])
        w1.set(10, 30, 12, [7, 4, 1])
        rec = spec_decode_point.read(ctx, None, None, before)
        assert rec.status == "measured" and (rec.drafts, rec.draft_tokens, rec.accepted_tokens) == (20, 60, 27)
        assert [p.accepted for p in rec.per_position] == [14, 9, 4] and rec.source.startswith("spec_decode_metrics")
        gone = SimpleNamespace(bench=SimpleNamespace(spec_decode_metrics_url=["http://127.0.0.1:9"]), api_key=None)
        missing = spec_decode_point.read(gone, None, None, spec_decode_point.before(gone))
        assert missing.status == "no_counters" and "none answered" in missing.detail
    finally:
        w0.httpd.shutdown()
        w1.httpd.shutdown()
    # without the arg the server's own snapshots are read
    own = SimpleNamespace(bench=SimpleNamespace(spec_decode_metrics_url=[]), api_key=None)
    assert spec_decode_point.before(own) is None
    assert spec_decode_point.read(own, {"vllm:x_total": 1.0}, {"vllm:x_total": 2.0}, None) is None


def test_run_benchmarks_writes_the_point_reading_into_the_record(stub_factory, tmp_path, tiny_tokenizer_dir) -> None:
    """run_benchmarks end to end on the stub (a named fake: no speculation of its own) with the drafts read from
    spec_decode_metrics_url: the point record carries spec_decode and says which prompts it sent."""
    stub = stub_factory("--ttft-ms", "2", "--itl-ms", "1")
    workers = _Metrics()
    workers.step = (5, 15, 9, [4, 3, 2])
    spec = model_spec(model_id="stub-id", served_model_name="stub-model",
                      device_model_spec={"max_context": 1024, "max_concurrency": 2, "perf_reference": []})
    spec.write(tmp_path / "spec.json")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TT_SERVED_MODEL_NAME="stub-model",
               TT_TOKENIZER_DIR=tiny_tokenizer_dir)
    env.pop("OPENAI_API_KEY", None)
    args = {"points": "64x8x1x2", "dataset": "lookup", "spec_decode_metrics_url": workers.url}
    try:
        p = subprocess.run([sys.executable, "-m", "benchmarking.run_benchmarks", "--run-dir", str(tmp_path),
                            "--model-spec-json", str(tmp_path / "spec.json"), "--server-url", stub.url,
                            "--workflow-args-json", json.dumps(args), "--disable-trace-capture"],
                           capture_output=True, text=True, env=env, timeout=120)
    finally:
        workers.httpd.shutdown()
    assert p.returncode == 0, p.stdout + p.stderr
    rec = json.loads((tmp_path / "benchmarks" / "point_isl-64_osl-8_con-1_n-2.json").read_text())
    assert rec["point"]["dataset"] == "lookup"
    spec_decode = rec["spec_decode"]
    assert spec_decode["status"] == "measured" and spec_decode["drafts"] == 5 and spec_decode["accepted_tokens"] == 9
    assert [q["accepted"] for q in spec_decode["per_position"]] == [4, 3, 2]
    assert "speculative decoding (spec_decode_metrics_url" in p.stdout
