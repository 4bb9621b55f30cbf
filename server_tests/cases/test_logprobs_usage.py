"""logprobs and echo shapes, and usage counts consistent with the text."""
from __future__ import annotations

import pytest

PROMPT = "The quick brown fox jumps over"
MESSAGES = [{"role": "user", "content": "Count from one to five."}]


@pytest.mark.logprobs
@pytest.mark.feature("logprobs")
def test_completion_logprobs_shape(api):
    out = api.completion(prompt=PROMPT, max_tokens=6, temperature=0, ignore_eos=True, logprobs=2)
    choice, n = out["choices"][0], out["usage"]["completion_tokens"]
    lp = choice["logprobs"]
    assert lp is not None, "logprobs=2 returned no logprobs"
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        assert len(lp[key]) == n, f"logprobs.{key} has {len(lp[key])} entries for {n} tokens"
    assert all(isinstance(x, float) and x <= 0.0 for x in lp["token_logprobs"])
    assert all(2 <= len(top) <= 3 for top in lp["top_logprobs"]), [len(t) for t in lp["top_logprobs"]]
    assert lp["text_offset"] == sorted(lp["text_offset"])
    assert "".join(lp["tokens"]) == choice["text"], "tokens do not spell the text"


@pytest.mark.chat
@pytest.mark.logprobs
@pytest.mark.feature("logprobs")
def test_chat_logprobs_shape(api):
    out = api.chat(messages=MESSAGES, max_tokens=6, temperature=0, ignore_eos=True, logprobs=True, top_logprobs=2)
    choice, n = out["choices"][0], out["usage"]["completion_tokens"]
    content = (choice.get("logprobs") or {}).get("content")
    assert content is not None, "logprobs=true returned no logprobs.content"
    assert len(content) == n, f"{len(content)} logprob entries for {n} tokens"
    for entry in content:
        assert isinstance(entry["token"], str) and entry["logprob"] <= 0.0
        assert len(entry["top_logprobs"]) == 2, entry
    assert "".join(e["token"] for e in content) == choice["message"]["content"]


@pytest.mark.logprobs
@pytest.mark.feature("echo")
def test_echo_prefixes_prompt(api):
    out = api.completion(prompt=PROMPT, max_tokens=4, temperature=0, ignore_eos=True, echo=True)
    text = out["choices"][0]["text"]
    assert text.startswith(PROMPT) and len(text) > len(PROMPT), f"echo text {text!r}"


@pytest.mark.logprobs
@pytest.mark.feature("echo")
@pytest.mark.feature("logprobs")
def test_echo_logprobs_cover_prompt(api):
    out = api.completion(prompt=PROMPT, max_tokens=4, temperature=0, ignore_eos=True, echo=True, logprobs=1)
    usage, lp = out["usage"], out["choices"][0]["logprobs"]
    total = usage["prompt_tokens"] + usage["completion_tokens"]
    assert len(lp["tokens"]) == total, f"{len(lp['tokens'])} logprob tokens for {total} prompt+completion tokens"
    assert lp["token_logprobs"][0] is None, "the first prompt token has no logprob"
    assert "".join(lp["tokens"]) == out["choices"][0]["text"]


@pytest.mark.usage
def test_usage_totals(api):
    out = api.completion(prompt=PROMPT, max_tokens=6, temperature=0, ignore_eos=True)
    usage = out["usage"]
    assert usage["completion_tokens"] == 6
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.usage
@pytest.mark.feature("logprobs")
def test_usage_matches_text(api):
    """The counted tokens are the tokens that spell the text (logprobs name each one)."""
    out = api.completion(prompt=PROMPT, max_tokens=6, temperature=0, ignore_eos=True, logprobs=0)
    tokens = out["choices"][0]["logprobs"]["tokens"]
    assert len(tokens) == out["usage"]["completion_tokens"]
    assert "".join(tokens) == out["choices"][0]["text"]


@pytest.mark.usage
@pytest.mark.stream
@pytest.mark.feature("stream")
@pytest.mark.alone
def test_stream_usage_equals_nonstream(api):
    body = dict(prompt=PROMPT, max_tokens=5, temperature=0, ignore_eos=True)
    whole = api.completion(**body)["usage"]
    streamed = api.stream("/v1/completions", **body, stream_options={"include_usage": True})
    assert streamed.usage is not None, "stream_options.include_usage gave no usage event"
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert streamed.usage[key] == whole[key], f"{key}: stream {streamed.usage[key]} vs {whole[key]}"
