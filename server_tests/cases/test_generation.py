"""Completions and chat, streaming and not: the answer's shape, and streaming equals non-streaming."""
from __future__ import annotations

import pytest

PROMPT = "The capital of France is"
MESSAGES = [{"role": "user", "content": "Name three colors."}]


@pytest.mark.completions
def test_models_lists_served_model(api):
    resp = api.get("/v1/models")
    assert resp.status_code == 200, resp.text[:300]
    ids = [m.get("id") for m in resp.json().get("data", [])]
    assert api.model in ids, f"served model {api.model!r} not in /v1/models: {ids}"


@pytest.mark.completions
@pytest.mark.feature("completions")
def test_completion_answer_shape(api):
    out = api.completion(prompt=PROMPT, max_tokens=4, temperature=0)
    assert out.get("object") == "text_completion"
    assert out.get("model") == api.model
    assert isinstance(out.get("id"), str) and out["id"]
    (choice,) = out["choices"]
    assert choice["index"] == 0
    assert isinstance(choice["text"], str) and choice["text"].strip(), f"empty text: {choice!r}"
    assert choice["finish_reason"] in ("stop", "length")


@pytest.mark.chat
@pytest.mark.feature("chat")
def test_chat_answer_shape(api):
    out = api.chat(messages=MESSAGES, max_tokens=6, temperature=0)
    assert out.get("object") == "chat.completion"
    assert out.get("model") == api.model
    (choice,) = out["choices"]
    message = choice["message"]
    assert message["role"] == "assistant", f"role {message.get('role')!r}"
    assert isinstance(message["content"], str) and message["content"].strip(), f"empty content: {message!r}"
    assert choice["finish_reason"] in ("stop", "length")


@pytest.mark.completions
@pytest.mark.stream
@pytest.mark.feature("stream")
@pytest.mark.alone
def test_completion_stream_equals_nonstream(api):
    body = dict(prompt=PROMPT, max_tokens=6, temperature=0, ignore_eos=True)
    whole = api.completion(**body)["choices"][0]["text"]
    streamed = api.stream("/v1/completions", **body)
    assert streamed.done, "stream did not end with data: [DONE]"
    assert all(ev.get("object") == "text_completion" for ev in streamed.events)
    assert streamed.texts(chat=False) == {0: whole}
    assert streamed.finish_reasons() == {0: "length"}


@pytest.mark.chat
@pytest.mark.stream
@pytest.mark.feature("stream")
@pytest.mark.alone
def test_chat_stream_equals_nonstream(api):
    body = dict(messages=MESSAGES, max_tokens=6, temperature=0, ignore_eos=True)
    whole = api.chat(**body)["choices"][0]["message"]["content"]
    streamed = api.stream("/v1/chat/completions", **body)
    assert streamed.done, "stream did not end with data: [DONE]"
    assert all(ev.get("object") == "chat.completion.chunk" for ev in streamed.events)
    roles = [c["delta"]["role"] for ev in streamed.events for c in ev.get("choices") or [] if c["delta"].get("role")]
    assert roles and roles[0] == "assistant", f"first delta role {roles[:1]}"
    assert streamed.texts(chat=True) == {0: whole}
