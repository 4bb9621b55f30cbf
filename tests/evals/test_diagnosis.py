"""One stable line per failed lm-eval task: the most specific cause wins, worded without counts."""

from __future__ import annotations

from pathlib import Path

from evals.diagnosis import http_statuses, summarize_failure
from evals.eval_config import EVAL_CONFIGS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
QA = EVAL_CONFIGS["SmolLM2-135M-Instruct"].task("tt_offline_qa")
ENDPOINT = "http://127.0.0.1:8123/v1/completions"

# What lm-eval 0.4.13 logs when some requests get HTTP 500: the final line depends on which
# in-flight request failed last, so three runs of the same fault end three different ways.
_500_LOG = """\
WARNING [api_models:520] API request failed! Status code: 500, Response text: boom. Retrying...
ERROR [api_models:556] Exception:ClientResponseError(RequestInfo(...), (), status=500, message='Internal Server Error'
"""
ENDINGS = [
    "aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error', url='x'",
    "aiohttp.client_exceptions.ClientOSError: [Errno 32] Can not write request body for x",
    "RuntimeError: Session is closed",
]


def test_http_500_reads_the_same_whatever_lm_eval_ended_with():
    lines = {summarize_failure(QA, _500_LOG + "Traceback ...\n" + end + "\n", 1, offline=True, endpoint=ENDPOINT)
             for end in ENDINGS}
    assert lines == {"server answered HTTP 500 to lm-eval's /v1/completions requests; "
                     "task tt_offline_qa gave up after 3 attempts per request"}


def test_server_gone_wins_over_everything():
    msg = summarize_failure(QA, _500_LOG + ENDINGS[2], 1, offline=True, endpoint=ENDPOINT,
                            server_gone="cannot connect to http://127.0.0.1:8123: [Errno 111] Connection refused")
    assert msg.startswith("cannot connect to http://127.0.0.1:8123") and "during task tt_offline_qa" in msg


def test_dataset_then_connection_then_last_exception():
    gsm8k = EVAL_CONFIGS["Llama-3.1-8B-Instruct"].task("gsm8k_cot_llama")
    text = (FIXTURES / "lm_eval_gsm8k_offline.log").read_text()  # real lm-eval 0.4.13 output
    assert summarize_failure(gsm8k, text, 1, offline=True, endpoint=ENDPOINT).startswith(
        "dataset openai/gsm8k cannot be reached")
    broken = "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n"
    assert summarize_failure(QA, broken, 1, offline=True, endpoint=ENDPOINT) == (
        f"connection to {ENDPOINT} broken during task tt_offline_qa (ServerDisconnectedError)")
    assert summarize_failure(QA, "Traceback\nValueError: bad config\n", 1, offline=True, endpoint=ENDPOINT) == (
        "lm-eval exited 1: ValueError: bad config")
    assert summarize_failure(QA, "", -9, offline=True, endpoint=ENDPOINT) == "lm-eval exited -9: no output"


def test_http_statuses_ignores_successes():
    assert http_statuses("Status code: 200\nStatus code: 503\nstatus=500, message='x'") == [500, 503]
