"""The lm-eval command line built for each model class, and the tokenizer choice behind it."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from evals.eval_config import EVAL_CONFIGS
from evals.lm_eval_command import (
    TASKS_DIR,
    Refusal,
    TokenizerChoice,
    api_root,
    build_command,
    choose_tokenizer,
    endpoint_url,
    probe_remote_tokenizer,
)

SMOL = EVAL_CONFIGS["SmolLM2-135M-Instruct"]
OUT = Path("/run/evals/t/lm_eval")
REMOTE = TokenizerChoice("remote", "test")


def _cmd(task, tokenizer=REMOTE, limit=25, url="http://127.0.0.1:8000"):
    return build_command(
        task,
        python="/venv/bin/python",
        server_url=url,
        model_name="served-name",
        output_dir=OUT,
        cache_path=OUT / "cache" / "requests",
        tokenizer=tokenizer,
        limit=limit,
    )


def _model_args(argv):
    return dict(kv.split("=", 1) for kv in argv[argv.index("--model_args") + 1].split(","))


def test_local_completions_loglikelihood_command():
    inv = _cmd(SMOL.task("tt_offline_mc"))
    argv = inv.argv
    assert argv[:6] == ["/venv/bin/python", "-m", "lm_eval", "run", "--model", "local-completions"]
    assert _model_args(argv) == {
        "model": "served-name",
        "base_url": "http://127.0.0.1:8000/v1/completions",
        "num_concurrent": "4",
        "max_retries": "3",
        "timeout": "120",
        "tokenizer_backend": "remote",
    }
    for flag, value in [
        ("--tasks", "tt_offline_mc"),
        ("--output_path", str(OUT)),
        ("--seed", "42"),
        ("--limit", "25"),
        ("--include_path", str(TASKS_DIR)),
        ("--num_fewshot", "0"),
        ("--use_cache", str(OUT / "cache" / "requests")),
    ]:
        assert argv[argv.index(flag) + 1] == value
    assert "--log_samples" in argv and "--apply_chat_template" not in argv
    assert inv.cwd == TASKS_DIR  # the YAML names its JSONL relative to this directory
    assert inv.display.startswith("/venv/bin/python -m lm_eval run --model local-completions")


def test_local_chat_completions_command():
    inv = _cmd(SMOL.task("tt_offline_chat"), tokenizer=TokenizerChoice(None, "chat"), limit=None)
    argv = inv.argv
    assert argv[argv.index("--model") + 1] == "local-chat-completions"
    margs = _model_args(argv)
    assert margs["base_url"] == "http://127.0.0.1:8000/v1/chat/completions"
    assert "tokenizer_backend" not in margs  # lm-eval's chat class needs none
    assert "--apply_chat_template" in argv and "--limit" not in argv


def test_standard_chat_task_command_has_fewshot_and_gen_kwargs():
    task = EVAL_CONFIGS["Llama-3.1-8B-Instruct"].task("gsm8k_cot_llama")
    inv = _cmd(task, tokenizer=TokenizerChoice(None, "chat"), limit=20)
    argv = inv.argv
    assert argv[argv.index("--num_fewshot") + 1] == "8"
    assert argv[argv.index("--fewshot_as_multiturn") + 1] == "true"
    assert argv[argv.index("--gen_kwargs") + 1] == "stream=false,max_gen_toks=1024"
    assert "--include_path" not in argv and inv.cwd == OUT


def test_huggingface_tokenizer_and_no_tokenizer():
    qa = SMOL.task("tt_offline_qa")
    margs = _model_args(_cmd(qa, tokenizer=TokenizerChoice("huggingface", "dir", path="/models/smol")).argv)
    assert margs["tokenizer_backend"] == "huggingface" and margs["tokenizer"] == "/models/smol"
    margs = _model_args(_cmd(qa, tokenizer=TokenizerChoice(None, "none")).argv)
    assert margs["tokenizer_backend"] == "None" and "tokenizer" not in margs


def test_auth_token_is_passed_but_never_displayed():
    inv = _cmd(SMOL.task("tt_offline_mc"), tokenizer=TokenizerChoice("remote", "x", auth_token="s3cret"))
    assert _model_args(inv.argv)["auth_token"] == "s3cret"
    assert "s3cret" not in inv.display and "auth_token=***" in inv.display


@pytest.mark.parametrize("url", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/completions"])
def test_api_root_normalises(url):
    assert api_root(url) == "http://h:1"
    assert endpoint_url(url, "local-chat-completions") == "http://h:1/v1/chat/completions"


def test_choose_tokenizer(tmp_path):
    mc, qa, chat = (SMOL.task(n) for n in ("tt_offline_mc", "tt_offline_qa", "tt_offline_chat"))
    yes, no = (lambda u, b: (True, None)), (lambda u, b: (False, None))
    assert choose_tokenizer(mc, "u", None, None, probe=yes).backend == "remote"
    assert choose_tokenizer(chat, "u", None, None, probe=yes).backend is None
    hf = choose_tokenizer(mc, "u", None, str(tmp_path), probe=no, have_transformers=True)
    assert (hf.backend, hf.path) == ("huggingface", str(tmp_path))
    with pytest.raises(Refusal, match="transformers is not installed"):
        choose_tokenizer(mc, "u", None, str(tmp_path), probe=no, have_transformers=False)
    with pytest.raises(Refusal, match="TT_TOKENIZER_DIR is empty"):
        choose_tokenizer(mc, "u", None, None, probe=no)
    assert choose_tokenizer(qa, "u", None, None, probe=no).backend is None  # generation needs none


class _TokenizerStub(http.server.BaseHTTPRequestHandler):
    """Answers the two tokenizer endpoints, but only with the right bearer."""

    def _reply(self):
        ok = self.headers.get("Authorization") == "Bearer tok"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"tokens": [1]} if ok else {"error": "Unauthorized"}).encode())

    do_GET = do_POST = _reply

    def log_message(self, *a):
        pass


def test_probe_uses_bearer_only_when_needed():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TokenizerStub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        assert probe_remote_tokenizer(url, "tok") == (True, "tok")
        assert probe_remote_tokenizer(url, None) == (False, None)
        assert probe_remote_tokenizer(url, "wrong") == (False, None)
    finally:
        srv.shutdown()
    assert probe_remote_tokenizer("http://127.0.0.1:9/v1", None, timeout=1, backoff_s=0) == (False, None)


class _FlakyTokenizer(http.server.BaseHTTPRequestHandler):
    """FAKE tokenizer endpoints: the first request of each path is answered HTTP 500."""

    seen: dict = {}

    def _reply(self):
        n = self.seen[self.path] = self.seen.get(self.path, 0) + 1
        self.send_response(500 if n == 1 else 200)
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = _reply

    def log_message(self, *a):
        pass


def test_one_500_on_the_tokenizer_probe_is_retried():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FlakyTokenizer)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        assert probe_remote_tokenizer(url, None, backoff_s=0) == (True, None)
        assert _FlakyTokenizer.seen == {"/tokenizer_info": 2, "/tokenize": 2}
    finally:
        srv.shutdown()
