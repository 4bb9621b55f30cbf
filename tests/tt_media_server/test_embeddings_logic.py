"""Unit tests of the embeddings logic that needs no model: LRU, de-duplication, micro-batching, encoding.

The encoder here is a recording fake standing in for the worker (named as such): it returns a
vector derived from each text so results can be checked, and records every batch it was sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import numpy as np
import pytest

MEDIA_ROOT = Path(__file__).resolve().parents[2] / "tt-media-server"
if str(MEDIA_ROOT) not in sys.path:
    sys.path.insert(0, str(MEDIA_ROOT))

from media_server.embeddings.batcher import BatchingConfig, EmbeddingBatcher, length_sorted_batches  # noqa: E402
from media_server.embeddings.cache import Embedding, EmbeddingCache  # noqa: E402
from media_server.embeddings.encoding import (EmbeddingInputError, EmbeddingModelInfo, check_options,  # noqa: E402
                                              decode_base64_vector, encode_vector, parse_input, resize,
                                              response_body, response_json)


class RecordingFakeEncoder:
    """Fake worker: vector = [len(text), hash bucket], tokens = word count; records each batch."""

    def __init__(self, delay: float = 0.01, fail_on: str | None = None):
        self.batches: list[list[str]] = []
        self.delay = delay
        self.fail_on = fail_on

    async def __call__(self, model: str, texts: list[str]) -> list[Embedding]:
        self.batches.append(list(texts))
        await asyncio.sleep(self.delay)
        if self.fail_on and self.fail_on in texts:
            raise RuntimeError(f"fake failure on {self.fail_on!r}")
        return [Embedding(np.array([len(text), sum(map(ord, text)) % 97], dtype=np.float32), len(text.split()))
                for text in texts]


def _batcher(config: BatchingConfig, capacity: int = 100, **fake) -> tuple[EmbeddingBatcher, RecordingFakeEncoder]:
    encoder = RecordingFakeEncoder(**fake)
    return EmbeddingBatcher(encoder, EmbeddingCache(capacity), config), encoder


def test_lru_evicts_least_recently_used_and_counts_through_callbacks():
    seen = []
    cache = EmbeddingCache(2, on_hit=lambda m, n: seen.append(("hit", m, n)),
                           on_miss=lambda m, n: seen.append(("miss", m, n)))
    one = Embedding(np.ones(2, np.float32), 1)
    cache.store("m", "a", one)
    cache.store("m", "b", one)
    assert set(cache.lookup("m", ["a"])) == {"a"}  # a is now the most recent
    cache.store("m", "c", one)
    assert set(cache.lookup("m", ["a", "b", "c"])) == {"a", "c"}
    assert cache.lookup("other-model", ["a"]) == {}  # keyed by (model, text)
    cache.count("m", hits=2, misses=1)
    assert seen == [("hit", "m", 2), ("miss", "m", 1)] and (cache.hits, cache.misses) == (2, 1)
    disabled = EmbeddingCache(0)
    disabled.store("m", "a", one)
    assert len(disabled) == 0
    with pytest.raises(ValueError, match="EMBEDDING_CACHE_SIZE"):
        EmbeddingCache(-1)


def test_duplicates_inside_a_request_are_computed_once_and_cache_returns_same_vector():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=1, max_size=8))
        first = await batcher.embed("m", ["a b", "c", "a b"])
        again = await batcher.embed("m", ["a b"])
        return batcher, encoder, first, again

    batcher, encoder, first, again = asyncio.run(run())
    assert encoder.batches == [["a b", "c"]]
    assert first[0] is first[2] and again[0] is first[0]
    assert [item.tokens for item in first] == [2, 1, 2]
    assert (batcher.cache.hits, batcher.cache.misses) == (2, 2)  # 1 duplicate + 1 LRU hit; 2 computed


def test_window_merges_concurrent_requests_and_dedups_across_them():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=50, max_size=64))
        results = await asyncio.gather(*(batcher.embed("m", [f"text {i}", "shared"]) for i in range(10)))
        return batcher, encoder, results

    batcher, encoder, results = asyncio.run(run())
    assert len(encoder.batches) == 1 and len(encoder.batches[0]) == 11
    assert all(result[1] is results[0][1] for result in results)
    assert batcher.cache.misses == 11 == sum(len(batch) for batch in encoder.batches)
    assert batcher.cache.hits == 9


def test_a_micro_batch_goes_out_with_the_request_ids_of_every_request_it_serves():
    """The worker's lines of a batch must name each request that waited on it: the encoder (the
    scheduler call, which hands the ids to the worker) sees them all, distinct, in arrival order."""
    from media_server.request_id import bound_request_ids, current_request_id

    seen: list[str | None] = []

    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=50, max_size=64))
        inner = batcher._encode

        async def encode(model, texts):
            seen.append(current_request_id())
            return await inner(model, texts)

        batcher._encode = encode

        async def request(request_id, texts):
            with bound_request_ids([request_id]):  # as the middleware marks a request's task
                return await batcher.embed("m", texts)

        await asyncio.gather(request("req-a", ["one", "shared"]), request("req-b", ["shared", "two"]),
                             request("req-a", ["three"]))
        await request("req-c", ["one", "four"])   # "one" from the cache: only req-c waits on "four"
        await request(None, ["five"])              # outside any request: no id
        return encoder

    encoder = asyncio.run(run())
    assert [sorted(batch) for batch in encoder.batches] == [["one", "shared", "three", "two"], ["four"], ["five"]]
    assert seen == ["req-a,req-b", "req-c", None]


def test_texts_already_being_computed_are_joined_not_recomputed():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=False), delay=0.05)
        first = asyncio.create_task(batcher.embed("m", ["slow text"]))
        await asyncio.sleep(0.01)
        second = await batcher.embed("m", ["slow text", "other"])
        return encoder, await first, second

    encoder, first, second = asyncio.run(run())
    assert encoder.batches == [["slow text"], ["other"]]
    assert first[0] is second[0]


def test_full_window_is_split_into_length_sorted_batches():
    # as few batches as max_size allows, sizes within one of each other (2 + 2, not 3 + 1)
    assert length_sorted_batches(["bb", "a", "dddd", "ccc"], 3) == [["dddd", "ccc"], ["bb", "a"]]
    assert length_sorted_batches([], 3) == []
    texts = ["x" * n for n in range(1, 10)]
    # at_least: the free workers each get a share (length neighbours together), never an empty batch
    assert [len(b) for b in length_sorted_batches(texts, 32, at_least=2)] == [5, 4]
    assert [len(b) for b in length_sorted_batches(texts, 4, at_least=2)] == [3, 3, 3]
    assert [len(b) for b in length_sorted_batches(texts[:2], 32, at_least=5)] == [1, 1]

    async def run():
        # A 20 s window: full batches go out at once (milliseconds), a batcher that waited for the
        # window would take 20 s, so the 10 s bound below is crossed only by that bug.
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=20_000, max_size=4))
        texts = ["x" * n for n in (3, 1, 7, 5, 2, 8, 4, 6)]
        started = asyncio.get_running_loop().time()
        await asyncio.gather(*(batcher.embed("m", [text]) for text in texts))
        return encoder, asyncio.get_running_loop().time() - started

    encoder, elapsed = asyncio.run(run())
    assert all(len(batch) <= 4 for batch in encoder.batches)
    for batch in encoder.batches:
        assert [len(text) for text in batch] == sorted((len(text) for text in batch), reverse=True)
    assert sorted(len(t) for batch in encoder.batches for t in batch) == list(range(1, 9))
    assert elapsed < 10.0  # full batches go out at once, without waiting for the 20 s window


def test_a_window_is_split_over_the_ready_workers_and_held_while_each_runs_a_batch():
    async def run():
        # Two ready workers, BATCH_MAX_INFLIGHT 0 (one batch per ready worker): the first window's
        # eight texts go out as two batches of four at once; texts arriving while both run are held
        # and leave together, to the worker that frees first.
        encoder = RecordingFakeEncoder(delay=0.2)
        batcher = EmbeddingBatcher(encoder, EmbeddingCache(100),
                                   BatchingConfig(enabled=True, window_ms=1, max_size=32), ready_workers=lambda m: 2)
        first = [asyncio.create_task(batcher.embed("m", [f"first {i}"])) for i in range(8)]
        await asyncio.sleep(0.05)
        later = [asyncio.create_task(batcher.embed("m", [f"later {i}"])) for i in range(6)]
        await asyncio.gather(*first, *later)
        return encoder, batcher

    encoder, batcher = asyncio.run(run())
    assert [len(batch) for batch in encoder.batches[:2]] == [4, 4]
    assert all(text.startswith("first") for batch in encoder.batches[:2] for text in batch)
    assert sorted(text for batch in encoder.batches[2:] for text in batch) == [f"later {i}" for i in range(6)]
    assert [len(batch) for batch in encoder.batches[2:]] == [6]  # one worker free: it takes them all
    assert batcher.inflight_limit("m") == 2
    assert EmbeddingBatcher(encoder, EmbeddingCache(1), BatchingConfig(max_inflight=3)).inflight_limit("m") == 3


def test_a_window_ending_while_a_batch_runs_waits_for_it_and_goes_out_as_one_batch():
    async def run():
        # A 1 ms window and a 200 ms batch: texts arriving while the first batch runs would go out
        # every few milliseconds in small batches; held, they leave as one batch when it returns.
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=1, max_size=64, max_inflight=1),
                                    delay=0.2)
        first = asyncio.create_task(batcher.embed("m", ["first"]))
        await asyncio.sleep(0.02)
        later = []
        for index in range(5):
            later.append(asyncio.create_task(batcher.embed("m", [f"later {index}"])))
            await asyncio.sleep(0.01)
        await asyncio.gather(first, *later)
        return encoder

    encoder = asyncio.run(run())
    assert encoder.batches[0] == ["first"]
    assert len(encoder.batches) == 2 and sorted(encoder.batches[1]) == [f"later {i}" for i in range(5)]
    with pytest.raises(ValueError, match="BATCH_MAX_INFLIGHT"):
        BatchingConfig(max_inflight=-1)


def test_padded_groups_batch_equal_lengths_and_split_where_padding_costs_more_than_a_call():
    from media_server.embeddings.onnx_backend import BATCH_TOKENS, padded_groups

    assert padded_groups([]) == []
    assert padded_groups([12] * 32) == [(0, 32)]  # no padding: one call
    assert padded_groups([9, 9, 10, 12, 20, 21, 22, 30, 40]) == [(0, 4), (4, 7), (7, 8), (8, 9)]
    groups = padded_groups([100] * 100)
    assert all((end - start) * 100 <= BATCH_TOKENS for start, end in groups)  # a call's padded tokens are bounded
    assert groups[0][0] == 0 and groups[-1][1] == 100
    assert all(a[1] == b[0] for a, b in zip(groups, groups[1:]))  # contiguous, every text once


def test_unpadded_groups_make_one_call_of_similar_texts_and_send_long_ones_apart():
    from media_server.embeddings.unpadded_bert import BATCH_TOKENS, groups

    assert groups([]) == []
    assert groups([9, 9, 10, 12, 14, 15, 16, 18, 20]) == [(0, 9)]  # padding costs no weight MatMul: one call
    # only attention pads: the two longest go together once their block costs more than a call
    assert groups([9, 9, 10, 12, 20, 21, 22, 30, 40]) == [(0, 7), (7, 9)]
    assert groups([10] * 31 + [256]) == [(0, 31), (31, 32)]  # its attention block would dwarf the rest
    split = groups([100] * 100)
    assert all(sum([100] * (end - start)) <= BATCH_TOKENS for start, end in split)
    assert split[0][0] == 0 and split[-1][1] == 100 and all(a[1] == b[0] for a, b in zip(split, split[1:]))
    assert groups([5000]) == [(0, 1)]  # a text longer than a call's budget still goes, alone


def test_unpadded_feeds_place_each_text_s_tokens_and_weights():
    from media_server.embeddings.unpadded_bert import INPUTS, MASKED, feeds

    mean = feeds([[101, 7, 102], [101, 8, 9, 10, 102]], "mean")
    assert list(mean) == list(INPUTS)
    assert mean["input_ids"].tolist() == [101, 7, 102, 101, 8, 9, 10, 102]
    assert mean["position_ids"].tolist() == [0, 1, 2, 0, 1, 2, 3, 4]
    assert mean["gather_index"].tolist() == [[0, 1, 2, 8, 8], [3, 4, 5, 6, 7]]  # 8: the zero row after the tokens
    assert mean["key_bias"].tolist() == [[0, 0, 0, np.float32(MASKED), np.float32(MASKED)], [0] * 5]
    assert mean["scatter_index"].tolist() == [0, 1, 2, 5, 6, 7, 8, 9]  # row * longest + position
    assert np.allclose(mean["pooling"].sum(1), 1) and np.allclose(mean["pooling"][0, :3], 1 / 3)
    assert mean["pooling"][0, 3:].sum() == 0 and mean["pooling"][1, :3].sum() == 0
    cls = feeds([[101, 7, 102], [101, 8, 9, 10, 102]], "cls")
    assert cls["pooling"].tolist() == [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0]]


def test_without_batching_each_request_goes_alone():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=False, max_size=2))
        await asyncio.gather(batcher.embed("m", ["a", "bbb", "cc"]), batcher.embed("m", ["d"]))
        return encoder

    encoder = asyncio.run(run())
    assert encoder.batches == [["bbb", "cc"], ["a"], ["d"]]


def test_a_failed_batch_fails_every_waiter_and_is_not_cached():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=True, window_ms=5, max_size=8), fail_on="bad")
        outcomes = await asyncio.gather(batcher.embed("m", ["bad", "x"]), batcher.embed("m", ["bad"]),
                                        return_exceptions=True)
        retry = await batcher.embed("m", ["x"])
        return batcher, encoder, outcomes, retry

    batcher, encoder, outcomes, retry = asyncio.run(run())
    assert all(isinstance(outcome, RuntimeError) for outcome in outcomes)
    assert batcher.cache.lookup("m", ["bad"]) == {} and retry[0].vector[0] == 1
    assert encoder.batches[-1] == ["x"]  # recomputed after the failure


def test_a_request_that_goes_away_does_not_cancel_shared_work():
    async def run():
        batcher, encoder = _batcher(BatchingConfig(enabled=False), delay=0.05)
        leaving = asyncio.create_task(batcher.embed("m", ["shared"]))
        staying = asyncio.create_task(batcher.embed("m", ["shared"]))
        await asyncio.sleep(0.01)
        leaving.cancel()
        return encoder, await staying

    encoder, result = asyncio.run(run())
    assert len(encoder.batches) == 1 and result[0].vector[0] == len("shared")


def test_batching_config_is_validated():
    with pytest.raises(ValueError, match="BATCH_WINDOW_MAX_SIZE"):
        BatchingConfig(max_size=0)
    with pytest.raises(ValueError, match="BATCH_WINDOW_MS"):
        BatchingConfig(window_ms=-1)


def test_base64_is_little_endian_float32_of_the_vector():
    vector = np.array([0.5, -1.25, 3.0e-8], dtype=np.float32)
    assert np.array_equal(decode_base64_vector(encode_vector(vector, "base64")), vector)
    body = response_body("m", [vector, vector], [3, 4], "float")
    assert body["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
    assert [item["index"] for item in body["data"]] == [0, 1] and body["object"] == "list"


def test_float_vectors_render_as_json_numbers_that_read_back_as_the_same_float32():
    rng = np.random.default_rng(7)
    vectors = [rng.standard_normal(384).astype(np.float32), np.array([0.5, -1.25, 3.0e-8, 0.1], np.float32)]
    text = response_json(response_body("m", vectors, [3, 4], "float"))
    parsed = json.loads(text)
    for item, vector in zip(parsed["data"], vectors):
        assert all(isinstance(number, float) for number in item["embedding"])
        assert np.array_equal(np.asarray(item["embedding"], dtype=np.float32), vector)
    assert parsed["data"][1]["embedding"] == [0.5, -1.25, pytest.approx(3.0e-8), pytest.approx(0.1)]
    assert b"0.1," in text or b"0.1]" in text  # float32 shortest repr, not float64's 0.10000000149011612


def test_dimensions_only_where_the_model_allows_and_renormalised():
    fixed = EmbeddingModelInfo("fixed", 4)
    check_options(fixed, "float", None, ["a"])
    check_options(fixed, "float", 4, ["a"])
    with pytest.raises(EmbeddingInputError, match="^dimensions: .*can be cut only to \\[4\\]"):
        check_options(fixed, "float", 2, ["a"])
    with pytest.raises(EmbeddingInputError, match="^encoding_format"):
        check_options(fixed, "int8", None, ["a"])
    matryoshka = EmbeddingModelInfo("m", 4, truncatable_to=(2,))
    check_options(matryoshka, "base64", 2, ["a"])
    cut = resize(np.array([3.0, 4.0, 1.0, 1.0], dtype=np.float32), 2, normalized=True)
    assert np.allclose(cut, [0.6, 0.8]) and cut.dtype == np.float32


@pytest.mark.parametrize("value, message", [
    ([], "empty list"), (3, "string or a list"), (["a", 1], "string or a list"), (["a", ""], r"input\[1\]"),
    ([[1, 2]], "string or a list")])
def test_bad_input_is_refused_naming_the_field(value, message):
    with pytest.raises(EmbeddingInputError, match=message):
        parse_input(value)
    assert parse_input("one") == ["one"]
