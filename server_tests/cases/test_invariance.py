"""Correctness under load: the same greedy request answers the same text alone and in a batch.

A server that batches requests must not let a request's neighbours change its answer: greedy
decoding of the same prompt is one answer, whatever else is in flight. Each prompt is sent alone
(one request at a time), then all of them at once (``BATCH`` in flight, 4 in a smoke run); the share of prompts
whose text differs is the divergence rate. It must not exceed the spec's
``device_model_spec.max_batch_divergence`` (``TT_TEST_MAX_BATCH_DIVERGENCE``, set by the tests
workflow; 0 unless the spec says a kernel legitimately differs, with the measured rate), decided on
its 95% Wilson interval (``contracts.intervals.decide_share``, the rule the report's check uses):
the case fails only when the rate clearly exceeds the allowance. The counts go to the JUnit
properties ``divergent`` and ``compared``, which the tests record sums into its judged rate.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from contracts.intervals import FAIL, decide_share

BATCH = 8
MAX_TOKENS = 12
#: Different openings, so the batch holds different sequences of different lengths.
INVARIANCE_PROMPTS = (
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    "To make a cup of tea, first",
    "The three primary colours are",
    "In 1969, the first people to walk on the Moon",
    "A good way to learn a new language is",
    "def fibonacci(n):",
    "The weather today is",
)


def _prompts() -> tuple[str, ...]:
    """``TT_TEST_INVARIANCE_PROMPTS`` of them (the tests workflow sets 4 in smoke mode), else ``BATCH``."""
    count = int(os.environ.get("TT_TEST_INVARIANCE_PROMPTS") or BATCH)
    return INVARIANCE_PROMPTS[:max(2, min(count, len(INVARIANCE_PROMPTS)))]


def _allowed() -> float:
    return float(os.environ.get("TT_TEST_MAX_BATCH_DIVERGENCE") or 0.0)


def _greedy(api, prompt: str) -> str:
    out = api.completion(prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, seed=0, ignore_eos=True)
    return out["choices"][0]["text"]


@pytest.mark.sampling
@pytest.mark.invariance
@pytest.mark.feature("ignore_eos")
def test_greedy_text_is_the_same_alone_and_in_a_batch(api, record_property):
    prompts = _prompts()
    alone = [_greedy(api, p) for p in prompts]
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        batched = list(pool.map(lambda p: _greedy(api, p), prompts))
    differ = [(p, a, b) for p, a, b in zip(prompts, alone, batched) if a != b]
    rate, allowed = len(differ) / len(prompts), _allowed()
    record_property("divergent", len(differ))
    record_property("compared", len(prompts))
    detail = "; ".join(f"{p[:30]!r}: alone {a!r} vs batched {b!r}" for p, a, b in differ[:3])
    assert decide_share(len(differ), len(prompts), allowed)[0] != FAIL, (
        f"batch divergence {len(differ)}/{len(prompts)} = {rate:.0%} clearly exceeds the allowed {allowed:.0%} "
        f"(max_batch_divergence, on its 95% Wilson interval): {detail}")
