"""Lossless speculative decoding: a speculating server's greedy output is the output without speculation.

Why it must hold: speculation only changes how many tokens one decode step yields; every drafted token is
verified against the model's own choice, so greedy text must not change. A difference is a serving bug
(a verification that accepts a wrong token, a KV cache that a rejected draft left dirty) and fails the run.

How "without speculation" is had on the same server: the reference path asks for one token per request
(``max_tokens=1``), feeding the prompt's token ids plus the tokens so far. A one-token request is answered by
the prefill step alone, so no draft is ever verified on it; the speculating path asks for all tokens at once.
Both are greedy on the same token ids (``return_token_ids``), compared token by token. The prompts quote and
repeat, so the n-gram drafter has something to draft; the server's spec-decode counters (when it exposes them)
must show drafts over the speculating requests, else the case tested nothing and fails saying so.

Runs only when the spec speculates (``TT_TEST_SPECULATIVE``, the spec's ``speculative_config`` as JSON, set by
the tests workflow); otherwise it is skipped with the reason. JUnit properties ``lossless_compared`` and
``lossless_divergent`` carry the counts, ``lossless_drafts`` the drafts seen.
"""
from __future__ import annotations

import json
import os

import pytest

#: Tokens compared per prompt. The reference path costs one request per token: on the 2-core CPU default under
#: speculation (about 4 s a request while other work shares the cores) 3 x 24 tokens ran past 300 s, 3 x 12 fit.
MAX_TOKENS = 12
#: The case's own deadline (the suite's default is 300 s): 3 + 3 x MAX_TOKENS requests on a slow speculating host.
DEADLINE_S = 600
PROMPTS = (
    "Copy the text exactly.\nText: the red fox jumps over the log, the red fox jumps over the log, the red fox "
    "jumps over the log.\nCopy: the red fox",
    "Rename total to amount.\n```python\ndef add(items):\n    total = 0\n    for item in items:\n        total = "
    "total + item\n    return total\n```\nRenamed:\n```python\ndef add(items):\n",
    "| 1 | apple | 3 |\n| 2 | pear | 5 |\n| 3 | plum | 7 |\n| 4 |",
)
_DRAFTS = ("vllm:spec_decode_num_drafts_total", "tt_spec_decode_num_drafts_total")


def _speculative() -> dict | None:
    text = os.environ.get("TT_TEST_SPECULATIVE") or ""
    return json.loads(text) if text.strip() else None


def _drafts(api) -> float | None:
    """The server's drafts counter (summed over engines), or None when it exposes none."""
    resp = api.get("/metrics")
    if resp.status_code != 200:
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in resp.text.splitlines()
              if line.startswith(_DRAFTS) and " " in line]
    return sum(values) if values else None


def _greedy(api, prompt, max_tokens: int) -> tuple[list[int], list[int]]:
    """(prompt token ids, generated token ids) of one greedy request."""
    out = api.completion(prompt=prompt, max_tokens=max_tokens, temperature=0, ignore_eos=True,
                         return_token_ids=True)
    choice = out["choices"][0]
    assert "token_ids" in choice, "the server returns no token_ids (return_token_ids): tokens cannot be compared"
    return list(choice.get("prompt_token_ids") or out.get("prompt_token_ids") or []), list(choice["token_ids"])


def _one_token_at_a_time(api, prompt_ids: list[int], n: int) -> list[int]:
    """Greedy tokens asked for one per request: each is a prefill, never a verified draft."""
    tokens: list[int] = []
    for _ in range(n):
        _, new = _greedy(api, prompt_ids + tokens, 1)
        assert len(new) == 1, f"max_tokens=1 returned {len(new)} tokens"
        tokens.append(new[0])
    return tokens


@pytest.mark.sampling
@pytest.mark.alone
@pytest.mark.lossless
@pytest.mark.feature("ignore_eos")
@pytest.mark.timeout(DEADLINE_S)
def test_greedy_output_is_the_same_with_and_without_speculation(api, record_property):
    config = _speculative()
    if config is None:
        pytest.skip("the spec does not speculate (no speculative_config): nothing to compare")
    before = _drafts(api)
    spoken = [_greedy(api, p, MAX_TOKENS) for p in PROMPTS]
    drafted = _drafts(api)
    reference = [_one_token_at_a_time(api, ids, len(out)) for ids, out in spoken]
    differ = []
    for prompt, (ids, out), ref in zip(PROMPTS, spoken, reference):
        assert ids, "the server returned no prompt_token_ids: the reference path cannot replay the prompt"
        first = next((k for k, (a, b) in enumerate(zip(out, ref)) if a != b), min(len(out), len(ref)))
        if out != ref:
            differ.append(f"{prompt[:30]!r}: from token {first} speculating {out[first:first + 4]} vs one at a "
                          f"time {ref[first:first + 4]}")
    drafts = None if before is None or drafted is None else drafted - before
    record_property("lossless_compared", len(PROMPTS))
    record_property("lossless_divergent", len(differ))
    record_property("lossless_drafts", "n/a" if drafts is None else int(drafts))
    assert not differ, (f"speculation ({json.dumps(config)}) changed the greedy output of {len(differ)} of "
                        f"{len(PROMPTS)} prompts: " + "; ".join(differ))
    assert drafts is None or drafts > 0, ("the server drafted nothing over the speculating requests: the check "
                                          "compared outputs no draft touched")
