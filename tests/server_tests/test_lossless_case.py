"""The tests workflow's lossless case (server_tests/cases/test_speculative.py) on a fake speculating server (a
named fake: an autoregressive toy model, no engine): it passes when the speculative path answers what one
token at a time answers, and fails when the speculative path changes a token."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from records.server_tests import TestsRecord
from tests.helpers import CPU_SPEC_ID, model_spec

REPO = Path(__file__).resolve().parents[2]
MODEL = "fake-model"
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 2}


class SpeculatingFake:
    """Greedy next token = a function of the last three ids; a request for more than one token goes through
    the 'speculative path' (drafts counted in /metrics), which with ``corrupt`` changes its fifth token."""

    def __init__(self, corrupt: bool = False) -> None:
        self.corrupt, self.drafts = corrupt, 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._send(self, f"vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {fake.drafts}\n", "text/plain")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                fake._send(self, json.dumps(fake.complete(body)), "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @staticmethod
    def _send(handler, text: str, kind: str) -> None:
        data = text.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def complete(self, body: dict) -> dict:
        prompt = body["prompt"]
        ids = [ord(c) % 251 for c in prompt] if isinstance(prompt, str) else list(prompt)
        out: list[int] = []
        for k in range(int(body["max_tokens"])):
            seq = ids + out
            nxt = (seq[-1] * 7 + seq[-2] * 3 + seq[-3]) % 251
            out.append((nxt + 1) % 251 if self.corrupt and k == 4 else nxt)
        if len(out) > 1:
            self.drafts += len(out) // 3
        choice = {"index": 0, "text": "".join(chr(65 + t % 26) for t in out), "finish_reason": "length",
                  "token_ids": out, "prompt_token_ids": ids}
        return {"id": "cmpl-fake", "object": "text_completion", "model": MODEL, "choices": [choice],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out)}}

    def __enter__(self) -> "SpeculatingFake":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _run_case(tmp_path: Path, base_url: str) -> tuple[subprocess.CompletedProcess, TestsRecord]:
    """The tests workflow, as run.py starts it, on a speculating spec, selecting the lossless case."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = model_spec(CPU_SPEC_ID, model_id="fake", served_model_name=MODEL)
    spec.device_model_spec.vllm_args["speculative_config"] = NGRAM
    spec.device_model_spec.max_concurrency = 1  # no pytest-xdist workers for a one-case run
    spec.write(tmp_path / "spec.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TT_TEST_") and k != "OPENAI_API_KEY"}
    env.update(PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "server_tests.run_tests", "--run-dir", str(tmp_path),
                           "--model-spec-json", str(tmp_path / "spec.json"), "--server-url", base_url,
                           "--workflow-args-json", json.dumps({"markers": "lossless"})],
                          capture_output=True, text=True, env=env, timeout=120)
    return proc, TestsRecord.read(tmp_path / "tests" / "tests_record.json")


def test_the_lossless_case_passes_on_an_honest_speculating_server_and_fails_on_a_corrupting_one(tmp_path):
    with SpeculatingFake() as honest:
        proc, record = _run_case(tmp_path / "honest", honest.base_url)
    assert proc.returncode == 0, proc.stdout[-3000:]
    [case] = record.cases
    assert case.outcome == "passed" and "lossless" in case.markers
    with SpeculatingFake(corrupt=True) as corrupting:
        proc, record = _run_case(tmp_path / "corrupt", corrupting.base_url)
    assert proc.returncode == 1, proc.stdout[-3000:]
    [case] = record.cases
    assert case.outcome == "failed" and "changed the greedy output of 3 of 3 prompts" in case.message
    assert "from token 4" in case.message
