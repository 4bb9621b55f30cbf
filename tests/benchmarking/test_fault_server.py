"""The FAKE fault-injecting server: each named fault, and how our client classes what it does."""
from __future__ import annotations

import json
import time

import pytest

from benchmarking.client import ClientConfig
from benchmarking.fake_answers import AnswerKey, WordTokenizer, completion_body
from benchmarking.fault_server import _hits, parse_faults
from benchmarking.prompts import request_body
from benchmarking.runner import WorkItem, run_point
from contracts import REPO_ROOT


@pytest.fixture
def fake(fake_server_process):
    """``fake(*faults, itl_ms=0.0)``: the shipped fault server with those faults, stopped after the test."""
    def make(*faults: str, itl_ms: float = 0.0):
        args = ["--model", "m", "--itl-ms", str(itl_ms)]
        for f in faults:
            args += ["--fault", f]
        return fake_server_process("benchmarking.fault_server", *args)
    return make


def items(n: int, osl: int = 8) -> list[WorkItem]:
    return [WorkItem(request_body("a b c", osl, "m", False), 3, osl)] * n


def classes(run) -> list:
    return [r.error_class for r in run.records]


def test_parse_faults_names_what_is_valid():
    assert parse_faults(["reset=0.3", "silence", "http_500_nth=2", ""]) == (
        {"reset": 0.3, "silence": 1.0, "http_500_nth": 2.0}, {2})
    for bad, msg in (["nope=1"], "unknown fault"), (["reset=2"], "fraction"), (["die_after=1.5"], "whole number"), \
                    (["reset"], "needs a number"):
        with pytest.raises(ValueError, match=msg):
            parse_faults(bad)


def test_fractions_are_spread_evenly_and_spare_the_first_requests():
    hits = [k for k in range(1, 101) if _hits(0.3, k)]
    assert len(hits) == 30 and hits[0] == 4 and not _hits(0.0, 5)


def test_sticky_500_fails_the_same_prompt_every_time_after_the_spared_ones(fake):
    server = fake("http_500_sticky=1", "spare_first=2")
    run = run_point(ClientConfig(base_url=server.url), items(4), [0.0] * 4, 1)
    assert classes(run) == [None, None, "http_5xx", "http_5xx"]


@pytest.mark.parametrize("fault, expected", [
    ("http_500=0.5", [None, "http_5xx", None, "http_5xx"]),
    ("malformed_sse=0.5", [None, "malformed_sse", None, "malformed_sse"]),  # invalid JSON, then no `data:`
    ("reset=0.5", [None, "connection_reset", None, "connection_reset"]),
    ("zero_tokens", ["no_content"] * 4),
    ("unavailable_s=30", ["http_5xx"] * 4),
])
def test_each_fault_is_classified_by_the_client(fake, fault, expected):
    run = run_point(ClientConfig(base_url=fake(fault).url, stall_timeout_s=5), items(4), [0.0] * 4, 1)
    assert classes(run) == expected


def test_silence_is_a_stall_within_the_stall_timeout_and_stops_the_point(fake):
    """40 requests, 2 at a time, 1 s stall timeout: the point ends after about one stall timeout
    (~1.25 s with the watchdog's tick). A point that let every remaining request wait for its own
    stall would take 20 s, so the 10 s bound is crossed only by that bug (or a stall never seen),
    never by a slow machine."""
    t0 = time.monotonic()
    run = run_point(ClientConfig(base_url=fake("silence").url, stall_timeout_s=1.0), items(40), [0.0] * 40, 2)
    took = time.monotonic() - t0
    assert classes(run) == ["stall", "stall"] and run.not_sent == 38 and run.stopped_by == "stall"
    assert 1.0 <= took < 10.0, took  # never before the stall timeout; far below 20 one-by-one stalls
    assert "no data for 1 s after its headers from http://127.0.0.1:" in run.records[0].error


def test_stall_after_n_streams_stops_the_point_at_the_first_stall(fake):
    # (a stall while other streams still answer does not stop a point: test_bench_stub_runs)
    run = run_point(ClientConfig(base_url=fake("stall_after=2").url, stall_timeout_s=1.0), items(5), [0.0] * 5, 1)
    assert classes(run) == [None, None, "stall"] and run.not_sent == 2


def test_die_after_ends_the_process_mid_stream(fake):
    server = fake("die_after=2")
    run = run_point(ClientConfig(base_url=server.url, stall_timeout_s=5), items(4), [0.0] * 4, 1)
    got = classes(run)
    assert got[:3] == [None, None, "connection_reset"], got
    assert got[3] in ("connect_error", "connection_reset"), got  # refused, or reset while the process exits
    assert server.proc.wait(5) == 3


def test_loglikelihood_answers_have_lm_eval_shape_and_the_answer_key_wins():
    tok = WordTokenizer()
    text = "Question: How many sides does a square have?\nAnswer: 4"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    key = AnswerKey(str(REPO_ROOT / "evals" / "tasks"))
    right = completion_body({"prompt": [ids], "echo": True, "logprobs": 1, "max_tokens": 1}, False, " x", "m", tok, key)
    wrong_ids = tok.encode(text[:-1] + "12")
    wrong = completion_body({"prompt": [wrong_ids], "echo": True, "logprobs": 1, "max_tokens": 1}, False, " x", "m",
                            tok, key)
    lp = right["choices"][0]["logprobs"]
    assert len(lp["token_logprobs"]) == len(ids) + 1 and lp["token_logprobs"][0] is None
    assert max(lp["top_logprobs"][1].values()) == lp["token_logprobs"][1]  # greedy, as lm-eval checks
    assert lp["token_logprobs"][-2] > wrong["choices"][0]["logprobs"]["token_logprobs"][-2]
    qa = completion_body({"prompt": "Q: What colour is grass?\nA:", "max_tokens": 5}, False, " x", "m", tok, key)
    assert qa["choices"][0]["text"] == " green"
    chat = completion_body({"messages": [{"role": "user", "content": "What colour is grass? Answer briefly."}]},
                           True, " x", "m", tok, key)
    assert "green" in chat["choices"][0]["message"]["content"]


def test_tokenizer_endpoints_and_request_log(tmp_path, fake_server_process):
    import urllib.request
    log = tmp_path / "req.jsonl"
    url = fake_server_process("benchmarking.fault_server", "--request-log", str(log)).url

    def post(path, body):
        req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.load(resp)
    ids = post("/tokenize", {"prompt": "Hello, world!"})["tokens"]
    assert post("/detokenize", {"tokens": ids})["prompt"] == "Hello, world!"
    with urllib.request.urlopen(url + "/tokenizer_info", timeout=5) as resp:
        assert json.load(resp)["eos_token"]
    post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows == [{**rows[0], "n": 1, "path": "/v1/completions", "stream": False, "fault": None}]
