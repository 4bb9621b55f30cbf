"""Bad requests get the right status: unknown model 404, bad parameters 400 (never 5xx), no bearer 401."""
from __future__ import annotations

import pytest

PROMPT = "Hello"

# name -> (endpoint, body without model); every one is a client mistake the server must name as such
BAD_REQUESTS = {
    "negative_max_tokens": ("/v1/completions", {"prompt": PROMPT, "max_tokens": -1}),
    "negative_temperature": ("/v1/completions", {"prompt": PROMPT, "temperature": -0.5}),
    "top_p_above_one": ("/v1/completions", {"prompt": PROMPT, "top_p": 1.5}),
    "n_zero": ("/v1/completions", {"prompt": PROMPT, "n": 0}),
    "missing_prompt": ("/v1/completions", {"max_tokens": 4}),
    "prompt_wrong_type": ("/v1/completions", {"prompt": {"text": PROMPT}, "max_tokens": 4}),
    "max_tokens_beyond_context": ("/v1/completions", {"prompt": PROMPT, "max_tokens": 10_000_000}),
    "messages_not_a_list": ("/v1/chat/completions", {"messages": "hi", "max_tokens": 4}),
}


@pytest.mark.errors
def test_unknown_model_is_404(api):
    resp = api.post("/v1/completions", {"model": "no-such-model-xyz", "prompt": PROMPT, "max_tokens": 4})
    assert resp.status_code == 404, f"HTTP {resp.status_code}: {resp.text[:300]}"
    assert "error" in resp.json() or "message" in resp.json()


@pytest.mark.errors
@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_parameter_is_400(api, case):
    path, body = BAD_REQUESTS[case]
    resp = api.post(path, {"model": api.model, **body})
    assert resp.status_code < 500, f"server error for a client mistake: HTTP {resp.status_code}: {resp.text[:300]}"
    assert resp.status_code == 400, f"HTTP {resp.status_code}: {resp.text[:300]}"


@pytest.mark.errors
def test_malformed_json_is_400(api):
    resp = api.post("/v1/completions", raw=b'{"model": "x", "prompt": ')
    assert resp.status_code < 500, f"server error for malformed JSON: HTTP {resp.status_code}"
    assert resp.status_code == 400, f"HTTP {resp.status_code}: {resp.text[:300]}"


def _needs_auth(api) -> None:
    if not api.api_key:
        pytest.skip("the server runs without auth (no OPENAI_API_KEY given)")


@pytest.mark.auth
@pytest.mark.feature("auth")
def test_missing_bearer_is_401(api):
    _needs_auth(api)
    resp = api.post("/v1/completions", {"model": api.model, "prompt": PROMPT, "max_tokens": 2}, bearer=None)
    assert resp.status_code == 401, f"HTTP {resp.status_code}: {resp.text[:200]}"


@pytest.mark.auth
@pytest.mark.feature("auth")
def test_invalid_bearer_is_401(api):
    _needs_auth(api)
    resp = api.post("/v1/completions", {"model": api.model, "prompt": PROMPT, "max_tokens": 2},
                    bearer="not-the-key-" + "x" * 16)
    assert resp.status_code == 401, f"HTTP {resp.status_code}: {resp.text[:200]}"
    resp = api.get("/v1/models", bearer="not-the-key-" + "x" * 16)
    assert resp.status_code == 401, f"GET /v1/models with a wrong bearer: HTTP {resp.status_code}"
