"""Sampling parameters are honoured: n, max_tokens, stop, seed, ignore_eos, min_tokens."""
from __future__ import annotations

import pytest

PROMPT = "Once upon a time, in a small village,"
# A question a chat model answers in a few tokens and then stops: ignore_eos and min_tokens each generate past
# that natural end, so a short one keeps both cases about a second on a CPU server (SmolLM2: 10 tokens; the
# earlier "Reply with one word: hello." drew a 48-token apology).
SHORT_ANSWER = [{"role": "user", "content": "Answer with a single word: what color is the sky?"}]


@pytest.mark.sampling
@pytest.mark.feature("n")
def test_n_choices(api):
    out = api.completion(prompt=PROMPT, n=3, max_tokens=4, temperature=1.0, seed=7, ignore_eos=True)
    indices = sorted(c["index"] for c in out["choices"])
    assert indices == [0, 1, 2], f"n=3 gave choice indices {indices}"
    assert all(c["text"] for c in out["choices"])
    assert out["usage"]["completion_tokens"] == 3 * 4, f"usage over 3 choices of 4 tokens: {out['usage']}"


@pytest.mark.sampling
@pytest.mark.stream
@pytest.mark.feature("n")
@pytest.mark.feature("stream")
def test_n_choices_stream(api):
    streamed = api.stream("/v1/completions", prompt=PROMPT, n=2, max_tokens=4, temperature=1.0, seed=7)
    texts = streamed.texts(chat=False)
    assert sorted(texts) == [0, 1], f"n=2 stream carried choice indices {sorted(texts)}"
    assert all(texts.values()), f"a choice streamed no text: {texts}"


@pytest.mark.sampling
def test_max_tokens(api):
    out = api.completion(prompt=PROMPT, max_tokens=5, temperature=0, ignore_eos=True)
    assert out["usage"]["completion_tokens"] == 5
    assert out["choices"][0]["finish_reason"] == "length"


@pytest.mark.sampling
@pytest.mark.feature("stop")
def test_stop_honoured(api):
    body = dict(prompt=PROMPT, max_tokens=16, temperature=0, ignore_eos=True)
    text = api.completion(**body)["choices"][0]["text"]
    words = [w.strip(".,;:!?\"'") for w in text.split()]
    stop = next((w for w in words if len(w) >= 3 and text.find(w) > 0), None)
    if stop is None:
        pytest.fail(f"no usable stop word in the greedy answer {text!r}")
    out = api.completion(**body, stop=[stop])
    choice = out["choices"][0]
    assert stop not in choice["text"], f"stop {stop!r} appears in {choice['text']!r}"
    assert choice["text"] == text[:text.find(stop)], (
        f"stopped text {choice['text']!r} is not the prefix before {stop!r}")
    assert choice["finish_reason"] == "stop"


@pytest.mark.sampling
@pytest.mark.feature("seed")
@pytest.mark.alone
def test_same_seed_same_text(api):
    body = dict(prompt=PROMPT, max_tokens=8, temperature=1.0, top_p=1.0, seed=1234, ignore_eos=True)
    first = api.completion(**body)["choices"][0]["text"]
    second = api.completion(**body)["choices"][0]["text"]
    assert first == second, f"seed 1234 at temperature 1 gave {first!r} then {second!r}"


@pytest.mark.sampling
@pytest.mark.feature("seed")
def test_different_seeds_different_text(api):
    body = dict(prompt=PROMPT, max_tokens=8, temperature=1.0, top_p=1.0, ignore_eos=True)
    texts = {api.completion(**body, seed=seed)["choices"][0]["text"] for seed in (1, 2, 3)}
    assert len(texts) > 1, f"seeds 1, 2, 3 at temperature 1 all gave {texts}"


_NATURAL_LENGTHS: dict[tuple[str, str], int] = {}


def _natural_length(api) -> int:
    """Tokens of a greedy answer that ends by itself (EOS); fails when the model never stops.

    Measured once per server and model: ignore_eos and min_tokens both need it, and each greedy
    answer costs seconds on a CPU server (the same request gives the same greedy answer)."""
    key = (api.base_url, api.model)
    if key not in _NATURAL_LENGTHS:
        out = api.chat(messages=SHORT_ANSWER, max_tokens=64, temperature=0)
        choice = out["choices"][0]
        if choice["finish_reason"] != "stop":
            pytest.fail(f"the greedy answer did not end by itself within 64 tokens: {choice!r}")
        _NATURAL_LENGTHS[key] = out["usage"]["completion_tokens"]
    return _NATURAL_LENGTHS[key]


@pytest.mark.sampling
@pytest.mark.feature("ignore_eos")
def test_ignore_eos(api):
    natural = _natural_length(api)
    out = api.chat(messages=SHORT_ANSWER, max_tokens=natural + 4, temperature=0, ignore_eos=True)
    assert out["usage"]["completion_tokens"] == natural + 4, (
        f"ignore_eos: {out['usage']['completion_tokens']} tokens, expected {natural + 4} (natural end at {natural})")
    assert out["choices"][0]["finish_reason"] == "length"


@pytest.mark.sampling
@pytest.mark.feature("min_tokens")
def test_min_tokens(api):
    natural = _natural_length(api)
    want = natural + 4
    out = api.chat(messages=SHORT_ANSWER, max_tokens=want + 16, min_tokens=want, temperature=0)
    got = out["usage"]["completion_tokens"]
    assert got >= want, f"min_tokens={want}: only {got} tokens (natural end at {natural})"
