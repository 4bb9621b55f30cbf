"""workflows/servers/log_errors.py: the one line of a server log that says why the server failed."""

from __future__ import annotations

from workflows.servers.log_errors import last_error, last_error_in, quote_server_error

# The shape of vLLM's CPU engine log when inductor finds no compiler: the engine core's traceback,
# then the API server's pointer to it, then 500s and the shutdown.
VLLM_NO_COMPILER = """\
(APIServer pid=1) INFO 11-22 21:50:01 [api_server.py:1000] Starting vLLM API server 0 on http://0.0.0.0:8000
(APIServer pid=1) INFO:     127.0.0.1:40000 - "POST /v1/completions HTTP/1.1" 200 OK
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710]   File "/opt/venv/lib/python3.11/site-packages/vllm/v1/sample/ops/logprobs.py", line 18, in batched_count_greater_than
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710]     return (x >= values).sum(-1)
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, 'g++')
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710]
(EngineCore_DP0 pid=42) ERROR 11-22 21:50:09 [core.py:710] Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace
(APIServer pid=1) ERROR 11-22 21:50:09 [async_llm.py:480] AsyncLLM output_handler failed.
(APIServer pid=1) ERROR 11-22 21:50:09 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(APIServer pid=1) INFO:     127.0.0.1:40002 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error
(APIServer pid=1) INFO 11-22 21:50:10 [launcher.py:110] Shutting down FastAPI HTTP server.
(APIServer pid=1) INFO:     Shutting down
"""  # noqa: E501 - vLLM's log lines as it writes them

MEDIA_WORKER_FAULT = """\
2026-11-22 21:50:01,123 worker-0 INFO runner cnn-cpu ready
2026-11-22 21:50:02,456 worker-0 ERROR batch failed
Traceback (most recent call last):
  File "media_server/workers.py", line 90, in run
    results = runner.run_batch(payloads)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x1280 and 1000x10)
2026-11-22 21:50:02,460 uvicorn.access INFO 127.0.0.1:5000 - "POST /v1/images HTTP/1.1" 500
"""


def test_the_root_cause_wins_over_the_pointer_to_it():
    assert last_error(VLLM_NO_COMPILER) == (
        "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found in "
        "torch._inductor.config.cpp.cxx: (None, 'g++')")


def test_media_worker_traceback_and_cannot_start_line():
    assert last_error(MEDIA_WORKER_FAULT) == (
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x1280 and 1000x10)")
    assert last_error("INFO starting\ntt-media-server: cannot start: MODEL_RUNNER 'x' is not a runner\n") == (
        "tt-media-server: cannot start: MODEL_RUNNER 'x' is not a runner")


def test_only_a_pointer_is_still_quoted_and_a_clean_log_quotes_nothing():
    pointer = "ERROR:    vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n"
    assert last_error(pointer) == "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    assert last_error("INFO ready\nINFO: 127.0.0.1 - \"POST /v1/completions\" 200 OK\nWARNING low memory\n") is None
    assert last_error("INFO no HTTPError was raised for this request\n") is None  # a name inside prose is not one


def test_quote_names_the_log_and_tolerates_a_missing_one(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(VLLM_NO_COMPILER)
    quoted = quote_server_error(log)
    assert quoted.startswith("server error: torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++")
    assert quoted.endswith(f"(log: {log})")
    assert last_error_in(tmp_path / "missing.log") is None and quote_server_error(None) is None
