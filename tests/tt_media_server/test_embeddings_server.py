"""Embeddings through the real media server with the real CPU model (all-MiniLM-L6-v2 from its wheel).

One server for the module, batching on with a wide window so concurrent requests really meet in
one forward pass.
"""

from __future__ import annotations

import base64
import concurrent.futures
import re

import numpy as np
import pytest

from tests.tt_media_server.conftest import module_server_fixtures

pytestmark = [pytest.mark.integration, pytest.mark.slow]

URL = "/v1/embeddings"
MODEL = "all-MiniLM-L6-v2"
SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank in the morning.",
    "Embeddings map text to vectors.",
    "Tenstorrent builds AI accelerators.",
    "The weather is nice today, so we went for a long walk through the park and then had lunch outside.",
    "Short.",
    "Vectors that are close in space have similar meanings, which is what semantic search relies on.",
    "One more sentence of medium length for the batch.",
]


server, client = module_server_fixtures("embeddings", {"MODEL": MODEL, "ENABLE_BATCHING": "1", "BATCH_WINDOW_MS": "100",
                                                       "BATCH_WINDOW_MAX_SIZE": "32", "EMBEDDING_CACHE_SIZE": "1000"})


def _embed(client, texts, **fields) -> dict:
    response = client.post(URL, json={"input": texts, "model": MODEL, **fields})
    assert response.status_code == 200, response.text
    return response.json()


def _vectors(body: dict) -> np.ndarray:
    return np.array([item["embedding"] for item in body["data"]], dtype=np.float32)


def _metric(client, name: str) -> float:
    text = client.get("/metrics").text
    match = re.search(rf'^{name}\{{model="{re.escape(MODEL)}"\}} ([0-9.e+]+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def test_models_list_kind_and_dimension(client):
    models = {item["id"]: item for item in client.get("/v1/models").json()["data"]}
    assert models[MODEL]["kind"] == "embedding" and models[MODEL]["dimension"] == 384


def test_batched_and_unbatched_vectors_are_identical(client):
    """Unbatched: each sentence alone, one request after the other (a batch of one each). Batched:
    the same sentences with a trailing space (the tokenizer drops it, so the model sees the same
    tokens, while the (model, text) cache does not answer them) sent at once, so they share
    padded forward passes."""
    alone = [_embed(client, text) for text in SENTENCES]
    batches_before = _metric(client, "embedding_batch_texts_count")
    sums_before = _metric(client, "embedding_batch_texts_sum")
    with concurrent.futures.ThreadPoolExecutor(len(SENTENCES)) as pool:
        together = list(pool.map(lambda text: _embed(client, text + " "), SENTENCES))
    batches = _metric(client, "embedding_batch_texts_count") - batches_before
    texts = _metric(client, "embedding_batch_texts_sum") - sums_before
    assert texts == len(SENTENCES) and batches < len(SENTENCES), (batches, texts)  # they really shared batches
    for single, batched in zip(alone, together):
        assert single["usage"] == batched["usage"]
        assert np.max(np.abs(_vectors(single) - _vectors(batched))) < 1e-5
    vectors = _vectors(_embed(client, SENTENCES))
    assert vectors.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.max(np.abs(vectors - np.concatenate([_vectors(body) for body in alone]))) < 1e-5


def test_cache_returns_identical_vectors_and_counters_move(client):
    texts = ["cache me once", "cache me twice", "cache me once"]
    hits, misses = _metric(client, "embedding_cache_hits_total"), _metric(client, "embedding_cache_misses_total")
    first = _embed(client, texts)
    assert _metric(client, "embedding_cache_misses_total") - misses == 2  # the duplicate was computed once
    assert _metric(client, "embedding_cache_hits_total") - hits == 1
    second = _embed(client, texts)
    assert _metric(client, "embedding_cache_misses_total") - misses == 2
    assert _metric(client, "embedding_cache_hits_total") - hits == 4
    assert first["data"] == second["data"] and first["usage"] == second["usage"]
    assert first["data"][0]["embedding"] == first["data"][2]["embedding"]


def test_base64_decodes_to_the_float_vectors(client):
    floats = _vectors(_embed(client, ["base64 check", "second"]))
    encoded = _embed(client, ["base64 check", "second"], encoding_format="base64")
    decoded = np.stack([np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
                        for item in encoded["data"]])
    assert decoded.shape == (2, 384) and np.array_equal(decoded, floats)


def test_usage_counts_tokenizer_tokens(client):
    # [CLS] hello world [SEP]: the tokens the model processed.
    assert _embed(client, "hello world")["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert _embed(client, ["hello world", "hello world"])["usage"]["prompt_tokens"] == 8


def test_dimensions_and_bad_input(client):
    assert len(_embed(client, "x", dimensions=384)["data"][0]["embedding"]) == 384
    cases = [({"input": "x", "dimensions": 128}, 400, "dimensions"), ({"input": []}, 400, "input"),
             ({"input": [1, 2]}, 400, "input"), ({"input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
             ({"input": "x", "model": "text-embedding-3-small"}, 404, MODEL), ({}, 400, "input")]
    for body, status, needle in cases:
        response = client.post(URL, json=body)
        assert response.status_code == status, (body, response.text)
        assert needle in response.json()["error"]["message"], (body, response.text)
